"""SL006: the tools/list payload, or a single schema, over a client's size budget."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._types import json_size

#: Per client: (budget in bytes of the whole `{"tools": [...]}`, severity, what was observed).
_TOTAL: dict[str, tuple[int, Severity, str]] = {
    "cursor": (200_000, "warning", "Cursor was reported showing 0 tools at ~220-287 KB"),
    "claude-code": (50_000, "warning", "Claude Code was reported loading no tools at 53-340 KB"),
}
#: Per client: (budget in bytes of one `inputSchema`, severity).
_SINGLE: dict[str, tuple[int, Severity]] = {"claude-api": (1_048_576, "error")}


def _names(labels: list[str], limit: int = 5) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f" (+{len(labels) - limit} more)" if len(labels) > limit else "")


@register
class PayloadSize(Rule):
    """## What it does
    Measures the `tools/list` result as compact UTF-8 JSON and each `inputSchema` on its own, and
    compares them with the sizes at which clients were seen to lose tools. The finding names the
    tools that would be lost and the largest tools to trim.

    ## Why is this bad?
    Clients have been reported failing silently on large tool lists: Cursor showed 0 tools for a
    ~220-287 KB list (41 KB worked; a forum staff reply, a single report); Claude Code loaded no
    tools of a server at 53 KB to 340 KB (single reports, one closed as a duplicate). Neither is a
    documented limit, so both are warnings and the finding says the tools *may* not load. claude.ai
    caps a single `inputSchema` at 1,048,576 bytes (an error: the tool is rejected). A single huge
    tool is SL026's.

    ## Example
    A server with 300 tools that each embed a 1 KB enum of country names.

    Use instead: fewer, broader tools; shared vocabularies as resources; enums moved into
    descriptions or validated server-side.

    ## References
    - anthropics/claude-code#26406, #51836, #71807: tools silently missing on large lists.
      https://github.com/anthropics/claude-code/issues/26406
      https://github.com/anthropics/claude-code/issues/51836
      https://github.com/anthropics/claude-code/issues/71807
    - Cursor forum staff reply (reported): 0 tools at ~220-287 KB, 41 KB worked.
    - ms-365-mcp-server PR#655 (reported): claude.ai's 1,048,576-byte `inputSchema` cap.
    """

    code = "SL006"
    name = "payload-too-large"
    summary = "total tools/list payload, or a single schema, over a client's size budget"
    severity: ClassVar[Mapping[str, Severity]] = {
        "cursor": "warning",
        "claude-code": "warning",
        "claude-api": "error",
    }

    def check_list(self) -> Iterator[Finding]:
        ctx = self.ctx
        total = ctx.payload_bytes
        by_budget: dict[int, dict[str, Severity]] = {}
        notes: dict[int, list[str]] = {}
        for client, (budget, level, seen) in _TOTAL.items():
            if client in ctx.profiles and total > budget:
                by_budget.setdefault(budget, {})[client] = level
                notes.setdefault(budget, []).append(seen)
        largest = sorted(ctx.tools, key=lambda t: t.size, reverse=True)
        for budget, levels in sorted(by_budget.items()):
            need, cut = total - budget, 0
            trim: list[str] = []
            for tool in largest:
                if cut >= need:
                    break
                cut += tool.size + 1
                trim.append(tool.label)
            yield from self.report(
                None,
                "",
                f"tools/list is {total:,} bytes, over {budget:,} ({'; '.join(notes[budget])}; single "
                f"reports, not a documented limit): the {len(ctx.tools)} tools may not load; dropping the "
                f"{len(trim)} largest would fit ({_names(trim)})",
                levels,
            )

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        for client, (budget, level) in _SINGLE.items():
            if client in self.ctx.profiles and tool.size > budget:
                size = json_size(tool.input_schema)
                if size > budget:
                    yield from self.report(
                        tool,
                        "/inputSchema",
                        f"inputSchema is {size:,} bytes, over {budget:,}: the tool would be rejected",
                        {client: level},
                    )
