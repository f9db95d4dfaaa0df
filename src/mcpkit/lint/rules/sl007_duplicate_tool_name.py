"""SL007: duplicate tool names, and names that differ only in case."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, register


@register
class DuplicateToolName(Rule):
    """## What it does
    Flags a tool whose name repeats an earlier tool's name, and (as info) names that differ only in
    letter case.

    ## Why is this bad?
    The spec says names SHOULD be unique within a server; the Claude API rejects the whole request
    with "Tool names must be unique", as do OpenAI and Gemini for function names, and clients that key
    tools by name silently keep one of the two. Names that differ only in case are legal but easy for
    a model (and for case-insensitive tooling) to confuse.

    ## Example
    ```json
    [{"name": "search", "inputSchema": {"type": "object"}},
     {"name": "search", "inputSchema": {"type": "object"}}]
    ```

    Use instead: distinct names (`search_issues`, `search_code`).

    ## References
    - MCP 2025-11-25, tools: names SHOULD be unique within a server.
      https://modelcontextprotocol.io/specification/2025-11-25/server/tools
    - Claude Code changelog 2.0.31 and the Claude API error "Tool names must be unique".
    """

    code = "SL007"
    name = "duplicate-tool-name"
    summary = "duplicate tool names (and names that differ only in case)"
    severity: ClassVar[Mapping[str, Severity]] = {
        "claude-code": "error",
        "claude-api": "error",
        "openai-strict": "error",
        "gemini": "error",
        "cursor": "warning",
        "vscode": "warning",
        "windsurf": "warning",
        "spec": "warning",
    }

    def check_list(self) -> Iterator[Finding]:
        first: dict[str, str] = {}
        folded: dict[str, str] = {}
        info: dict[str, Severity] = dict.fromkeys(self.severity, "info")
        for tool in self.ctx.tools:
            name = tool.name
            if name is None:
                continue
            if name in first:
                yield from self.report(
                    tool, "/name", f"duplicate tool name {name!r} (first used by an earlier tool)"
                )
                continue
            first[name] = name
            other = folded.setdefault(name.casefold(), name)
            if other != name:
                yield from self.report(
                    tool, "/name", f"tool name {name!r} differs from {other!r} only in case", info
                )
