"""SL024: lone surrogates, NUL and other control characters, bidi controls or invisible characters in text."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import escape

_OTHER: dict[str, Severity] = dict.fromkeys(
    ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "openai-strict", "gemini", "spec"),
    "warning",
)
_SURROGATE: dict[str, Severity] = {**_OTHER, "claude-code": "error", "claude-api": "error"}
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_INVISIBLE = frozenset("\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff")
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def classify(ch: str) -> str | None:
    """What is wrong with one character, or `None`.

    >>> classify("\\u202e"), classify("\\x00"), classify("a")
    ('bidi control U+202E', 'control character U+0000', None)
    """
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return f"lone surrogate U+{code:04X}"
    if (code < 0x20 and ch not in _ALLOWED_CONTROLS) or 0x7F <= code <= 0x9F:
        return f"control character U+{code:04X}"
    if ch in _BIDI:
        return f"bidi control U+{code:04X}"
    if ch in _INVISIBLE or 0xE0000 <= code <= 0xE007F:
        return f"invisible character U+{code:04X} ({unicodedata.name(ch, 'unnamed')})"
    return None


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(JSON pointer, string) for every string in `value`, keys included (a key's pointer is its own)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            sub = f"{path}/{escape(key)}"
            yield sub, key
            yield from _strings(child, sub)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _strings(child, f"{path}/{i}")


@register
class UnsafeText(Rule):
    """## What it does
    Looks at every string of a tool (name, title, description, annotations, and every key and string
    value of its schemas) for lone UTF-16 surrogates, NUL and other control characters (tab, newline
    and carriage return are fine), bidirectional controls (U+202A-202E, U+2066-2069) and invisible
    characters (zero-width spaces and joiners, U+2060-2064, BOM, Unicode tag characters).

    ## Why is this bad?
    A lone surrogate cannot be encoded as UTF-8: the Claude API answers 400 ("no low surrogate in
    string") for the whole request, so one such description breaks every turn in Claude Code. Control
    characters break terminals and logs and are stripped or refused by some gateways. Bidi controls
    and invisible characters make text read differently to a person than to the model: the classic
    way to hide instructions in a tool description that a reviewer approves.

    ## Example
    ```json
    {"name": "notes", "description": "Saves a note.\\u202e.elif siht daer\\u202c"}
    ```

    Use instead: plain text; strip control, bidi and zero-width characters from generated strings.

    ## References
    - anthropics/claude-code#60394 (2026-05-19, Claude Code 2.1.143), #6273 (2025-08-21): API 400
      "The request body is not valid JSON: no low surrogate in string", every retry.
      https://github.com/anthropics/claude-code/issues/60394
    - Unicode Technical Report #36 (security considerations): bidi controls and invisible characters
      that make text display differently from what it is.
      https://www.unicode.org/reports/tr36/
    - "Trojan Source" (CVE-2021-42574): bidi overrides that hide what text does.
      https://trojansource.codes/
    """

    code = "SL024"
    name = "unsafe-text"
    summary = (
        "lone surrogates, control, bidi or invisible characters in names, descriptions or schema strings"
    )
    severity: ClassVar[Mapping[str, Severity]] = _SURROGATE

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        if not tool.suspicious:
            return
        for path, text in _strings(tool.raw, ""):
            if text.isascii() and text.isprintable():
                continue
            problems = sorted({p for p in map(classify, set(text)) if p})
            if not problems:
                continue
            surrogate = any(p.startswith("lone surrogate") for p in problems)
            effect = (
                "cannot be encoded as UTF-8: the Claude API rejects the whole request"
                if surrogate
                else "text that displays differently from what the model reads, or that breaks terminals"
            )
            yield from self.report(
                tool,
                path or "/",
                f"{', '.join(problems[:4])} in this string: {effect}",
                _SURROGATE if surrogate else _OTHER,
            )
