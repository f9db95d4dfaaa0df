"""SL014: more tools than a client's budget."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, register

#: Per client: (most tools it uses, severity, what happens beyond).
BUDGETS: dict[str, tuple[int, Severity, str]] = {
    "cursor": (80, "warning", "Cursor warns above 80 tools in total; it used to take only the first 40"),
    "windsurf": (100, "warning", "Windsurf caps Cascade at 100 tools in total"),
    "vscode": (128, "warning", "Copilot sends at most 128 tools per request, built-ins included"),
    "openai-strict": (128, "error", "OpenAI rejects more than 128 tools"),
}


@register
class TooManyTools(Rule):
    """## What it does
    Counts the tools against each client's budget and names the tools past it.

    ## Why is this bad?
    Clients cap how many tools reach the model, and the cap counts every server plus built-ins:
    Cursor used the first 40 (single reports, 2025) and later moved to a warning at 80, so the budget
    here is 80; Windsurf 100 (documented), VS Code / Copilot 128 per request (built-ins included),
    Antigravity 50; OpenAI's API rejects more than 128. The budget counts every server of the
    client's configuration: `mcpkit lint --config` checks the total.

    ## Example
    A server exposing one tool per REST endpoint: 180 tools.

    Use instead: fewer tools with a parameter that selects the operation, or tool groups the user
    enables.

    ## References
    - Windsurf MCP docs: 100 tools.
      https://docs.windsurf.com/windsurf/cascade/mcp
    - vscode-copilot-release#11653 (reported): 128 tools per request.
    - sentry-mcp-stdio#3, Snowflake-Labs/mcp#77 (reported): Cursor's 40.
    """

    code = "SL014"
    name = "too-many-tools"
    summary = "more tools than a client's budget (Cursor, Windsurf, VS Code / Copilot, ...)"
    severity: ClassVar[Mapping[str, Severity]] = {client: level for client, (_, level, _) in BUDGETS.items()}

    def check_list(self) -> Iterator[Finding]:
        tools = self.ctx.tools
        for client, (budget, level, effect) in BUDGETS.items():
            if client not in self.ctx.profiles or len(tools) <= budget:
                continue
            lost = [t.label for t in tools[budget:]]
            shown = ", ".join(lost[:5]) + (f" (+{len(lost) - 5} more)" if len(lost) > 5 else "")
            yield from self.report(
                None, "", f"{len(tools)} tools, over {budget} ({effect}): past it, {shown}", {client: level}
            )
