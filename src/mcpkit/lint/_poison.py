"""Signals of tool poisoning in text a model reads (the `security` rule group, SL101-SL103).

Each detector needs two signals near each other (an instruction *and* a sensitive target, a
reference to other tools *and* a side effect), because either alone is common in honest
descriptions ("Read the complete contents of a file", "Prefer this over other search tools").
Written by hand: the scanners that exist (cisco's mcp-scanner, invariant's) run an LLM or a remote
API, or flag single keywords, which is what made their false positives.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._profiles import PROFILES
from mcpkit.lint._rule import Rule, ToolView
from mcpkit.lint._walk import escape

_I = re.I

# --- SL101: instructions to read files or secrets and hand them over ------------------------------
SENSITIVE_PATH = re.compile(
    r"~/\.ssh|\.ssh/|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.netrc\b|\.npmrc\b|\.pypirc\b"
    r"|\.git-credentials|/etc/(?:passwd|shadow)\b|\bmcp\.json\b|claude_desktop_config|\.cursor/"
    r"|\.env\b(?!ironment)|\bwallet\.dat\b|\.kube/config|\.docker/config\.json|\bkeychain\b",
    _I,
)
READ_VERB = re.compile(
    r"\b(?:read|cat|open|load|include|attach|pass|send|upload|copy|provide|append|fetch)\b", _I
)
READ_AND_PASS = re.compile(
    r"\b(?:read|cat|open)\b[^.\n]{0,60}\b(?:file|contents?)\b[^.\n]{0,80}\b(?:pass|send|include|put|add)\b"
    r"[^.\n]{0,40}\b(?:parameter|argument|field|sidenote|note)s?\b",
    _I,
)

# --- SL102: concealment from the user ---------------------------------------------------------------
CONCEAL = re.compile(
    r"\b(?:do not|don't|dont|never|must not|should not|shouldn't|without)\s+(?:\w+\s+){0,3}?"
    r"(?:tell|telling|inform|informing|mention|mentioning|reveal|revealing|notify|notifying|alert|alerting"
    r"|disclose|disclosing)\b[^.\n]{0,40}\b(?:user|human|operator)s?\b"
    r"|\b(?:hide|hiding|conceal|concealing)\b[^.\n]{0,40}\bfrom\s+(?:the\s+)?(?:user|human)s?\b"
    r"|\bthe\s+(?:user|human)\s+(?:must|should|will|need)\s*(?:not|never|n't)\s+(?:know|see|notice|be told)\b"
    r"|<\s*(?:important|secret|hidden|system)\s*>",
    _I,
)

# --- SL103: changing how other tools or servers behave ---------------------------------------------
OTHER_TOOLS = re.compile(
    r"\b(?:other|another|all|any|every)\s+(?:mcp\s+)?(?:servers?|tools?|functions?|(?:e-?mail|mail)\s+tools?)\b"
    r"|\bwhen(?:ever)?\b[^.\n]{0,60}\b(?:tool|function)\b[^.\n]{0,40}\b(?:is|are)\s+(?:called|used|invoked)\b",
    _I,
)
SIDE_EFFECT = re.compile(
    r"\bbcc\b|\bforward(?:ed)?\s+(?:a\s+copy|all|every|it|them)\b|\bredirect\b"
    r"|\b(?:also|instead|always)\s+send\b|\bsend\s+(?:a\s+copy|copies)\b"
    r"|\bchange\s+(?:the\s+)?(?:recipient|destination|url|address|to\s+address|account)\b"
    r"|\b(?:must|should|always)\s+(?:be\s+)?(?:sent|forwarded|copied|routed)\s+to\b"
    r"|\badd\b[^.\n]{0,20}\b(?:recipient|address)\b",
    _I,
)
_WINDOW = 160


def _near(text: str, first: re.Pattern[str], second: re.Pattern[str]) -> re.Match[str] | None:
    for hit in first.finditer(text):
        lo, hi = max(0, hit.start() - _WINDOW), hit.end() + _WINDOW
        if second.search(text, lo, hi):
            return hit
    return None


def file_read(text: str) -> re.Match[str] | None:
    """An instruction to read a sensitive file (or a file into a parameter)."""
    return _near(text, SENSITIVE_PATH, READ_VERB) or READ_AND_PASS.search(text)


def concealment(text: str) -> re.Match[str] | None:
    """An instruction to keep something from the user."""
    return CONCEAL.search(text)


def shadowing(text: str) -> re.Match[str] | None:
    """An instruction that changes what other tools or servers do."""
    return _near(text, OTHER_TOOLS, SIDE_EFFECT)


def excerpt(text: str, hit: re.Match[str], width: int = 70) -> str:
    """The text around a match, on one line, for the message."""
    lo, hi = max(0, hit.start() - width // 2), min(len(text), hit.end() + width // 2)
    core = " ".join(text[lo:hi].split())
    return ("…" if lo else "") + core + ("…" if hi < len(text) else "")


def model_text(tool: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(JSON pointer, text) for the text of a tool that reaches the model: description, title, and
    every `description`/`title` in its input schema."""
    for key in ("description", "title"):
        value = tool.get(key)
        if isinstance(value, str):
            yield f"/{key}", value
    annotations = tool.get("annotations")
    if isinstance(annotations, dict) and isinstance(annotations.get("title"), str):
        yield "/annotations/title", annotations["title"]
    yield from _schema_text(tool.get("inputSchema"), "/inputSchema")


def _schema_text(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, child in value.items():
            sub = f"{path}/{escape(key)}"
            if key in ("description", "title") and isinstance(child, str):
                yield sub, child
            elif isinstance(child, dict | list):
                yield from _schema_text(child, sub)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _schema_text(child, f"{path}/{i}")


class InstructionRule(Rule):
    """A `security` rule that looks for one kind of instruction in what a model reads: each tool's
    text (description, title, schema strings) and the server's instructions."""

    group = "security"
    severity: ClassVar[Mapping[str, Severity]] = dict.fromkeys(PROFILES, "warning")
    finding: ClassVar[str]  # "an instruction to ...", followed by the quoted excerpt

    @staticmethod
    def detect(text: str) -> re.Match[str] | None:
        """Where `text` gives the instruction this rule looks for (a detector of this module)."""
        raise NotImplementedError

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        for path, text in model_text(tool.raw):
            hit = self.detect(text)
            if hit:
                yield from self.report(tool, path, f'{self.finding}: "{excerpt(text, hit)}"')
                return

    def check_list(self) -> Iterator[Finding]:
        text = self.ctx.instructions
        hit = self.detect(text) if isinstance(text, str) and text else None
        if isinstance(text, str) and hit:
            yield from self.report(None, "/instructions", f'{self.finding}: "{excerpt(text, hit)}"')
