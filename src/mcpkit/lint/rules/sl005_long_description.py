"""SL005: a tool description or the server instructions longer than a client keeps."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register

#: Per client: (limit in UTF-16 code units, severity, what happens beyond it).
_DESCRIPTION_LIMITS: dict[str, tuple[int, Severity, str]] = {
    "claude-code": (2048, "warning", "Claude Code truncates it"),
    "openai-strict": (1024, "error", "OpenAI rejects it (string_above_max_length)"),
}
_INSTRUCTION_LIMITS: dict[str, tuple[int, Severity, str]] = {
    "claude-code": (2048, "warning", "Claude Code truncates them"),
}


def utf16_length(text: str) -> int:
    """Length as JavaScript's `String.length` counts it: astral characters count 2.

    >>> utf16_length("a😀")
    3
    """
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@register
class LongDescription(Rule):
    """## What it does
    Measures each tool `description` and the server `instructions` in UTF-16 code units, as
    JavaScript's `String.length` does (an emoji counts 2), against each client's limit.

    ## Why is this bad?
    Claude Code cuts tool descriptions and server instructions at 2048 code units and appends
    "… [truncated]", silently: whatever the model needed past the cut is gone, and the `/mcp` view
    still shows the full text. OpenAI rejects function descriptions over 1024 characters.

    ## Example
    ```json
    {"name": "run", "description": "Runs a query. <3,000 characters of reference material>"}
    ```

    Use instead: a short description with the critical details first; move reference material into a
    resource or into the parameter descriptions.

    ## References
    - Claude Code MCP docs: "truncates tool descriptions and server instructions at 2KB each" (since
      2.1.84).
      https://docs.anthropic.com/en/docs/claude-code/mcp
    - anthropics/claude-code#41593, #87650: the silent 2048-unit cut.
      https://github.com/anthropics/claude-code/issues/41593
      https://github.com/anthropics/claude-code/issues/87650
    - RedHatInsights/insights-mcp#340: server instructions over the limit.
      https://github.com/RedHatInsights/insights-mcp/issues/340
    - sentry-mcp#106 (reported): OpenAI `string_above_max_length` at 1024.
    """

    code = "SL005"
    name = "long-description"
    summary = (
        "tool description or server instructions over 2048 UTF-16 code units (counted as JavaScript does)"
    )
    severity: ClassVar[Mapping[str, Severity]] = {"claude-code": "warning", "openai-strict": "error"}

    def _over(
        self, text: str, limits: dict[str, tuple[int, Severity, str]]
    ) -> tuple[int, dict[str, Severity], str]:
        floor = min((limits[p][0] for p in self.ctx.profiles if p in limits), default=None)
        if floor is None or len(text) <= floor // 2:
            return 0, {}, ""
        length = utf16_length(text)
        hit = {p: lim for p, lim in limits.items() if p in self.ctx.profiles and length > lim[0]}
        effects = "; ".join(f"over {lim[0]}: {lim[2]}" for lim in sorted(set(hit.values())))
        return length, {p: lim[1] for p, lim in hit.items()}, effects

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        text = tool.raw.get("description")
        if isinstance(text, str):
            length, levels, effects = self._over(text, _DESCRIPTION_LIMITS)
            if levels:
                yield from self.report(
                    tool, "/description", f"description is {length} UTF-16 code units ({effects})", levels
                )

    def check_list(self) -> Iterator[Finding]:
        text = self.ctx.instructions
        if isinstance(text, str):
            length, levels, effects = self._over(text, _INSTRUCTION_LIMITS)
            if levels:
                yield from self.report(
                    None,
                    "/instructions",
                    f"server instructions are {length} UTF-16 code units ({effects})",
                    levels,
                )
