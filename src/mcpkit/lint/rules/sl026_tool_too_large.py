"""SL026: one tool whose definition alone is very large (context cost on every request)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._types import json_size

#: Bytes of one tool's JSON above which it is reported (about 6,000 tokens at ~4 bytes a token).
TOOL_BUDGET = 25_000
_CLIENTS = ("claude-code", "claude-api", "cursor", "vscode", "windsurf")


def _largest_part(raw: dict[str, object]) -> tuple[str, int]:
    """The biggest direct property of `inputSchema` (or the description), for the message."""
    best = ("/description", json_size(raw.get("description", "")))
    schema = raw.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(props, dict):
        for name, sub in props.items():
            size = json_size(sub)
            if size > best[1]:
                best = (f"/inputSchema/properties/{name}", size)
    defs = schema.get("$defs") if isinstance(schema, dict) else None
    if isinstance(defs, dict) and json_size(defs) > best[1]:
        best = ("/inputSchema/$defs", json_size(defs))
    return best


@register
class ToolTooLarge(Rule):
    """## What it does
    Measures each tool on its own (compact UTF-8 JSON) and reports a tool over 25,000 bytes, naming
    its largest part (a giant `enum`, an embedded `$defs` block, a long description).

    ## Why is this bad?
    Every tool definition is sent with every model request. One tool of 25 KB is about 6,000 tokens
    of context on each turn, and a quarter to a half of the whole-list sizes at which Claude Code
    and Cursor have been reported dropping a server's tools (SL006) — so one oversized tool can take
    the rest of its server down with it. The usual cause is an inlined vocabulary (a 180 KB `enum` of
    every country, product or time zone) that belongs in a resource or in server-side validation.

    ## Example
    A `set_timezone` tool whose `tz` parameter enumerates all 600 IANA zone names with descriptions.

    Use instead: a plain string parameter ("an IANA zone such as Europe/Paris"), validated by the
    server, or a separate lookup tool or resource.

    ## References
    - Anthropic, tool use: tool definitions count as input tokens on every request.
      https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview#pricing
    - anthropics/claude-code#26406 (reported): a server's tools silently missing on large lists.
      https://github.com/anthropics/claude-code/issues/26406
    """

    code = "SL026"
    name = "tool-too-large"
    summary = "a single tool over 25,000 bytes of JSON (context on every request; crowds out the rest)"
    severity: ClassVar[Mapping[str, Severity]] = dict.fromkeys(_CLIENTS, "warning")

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        if tool.size <= TOOL_BUDGET:
            return
        part, size = _largest_part(tool.raw)
        yield from self.report(
            tool,
            part,
            f"this tool alone is {tool.size:,} bytes (about {tool.size // 4:,} tokens on every request), "
            f"over {TOOL_BUDGET:,}; its largest part is {part} ({size:,} bytes)",
        )
