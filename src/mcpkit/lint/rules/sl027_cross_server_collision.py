"""SL027: the same tool name on two servers of one client configuration (`mcpkit lint --config`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Severity
from mcpkit.lint._rule import Rule, register

#: Claude Code and Claude Desktop name tools `mcp__<key>__<tool>`, so a repeated name is only a note there.
COLLISION_LEVELS: dict[str, Severity] = {
    "cursor": "warning",
    "vscode": "warning",
    "windsurf": "warning",
    "claude-code": "info",
    "spec": "info",
}


@register
class CrossServerCollision(Rule):
    """## What it does
    In `mcpkit lint --config` mode, after every configured server has been listed, reports each tool
    name that more than one server serves (`search`, `read_file`, `create_issue` are common). A single
    server's duplicates are SL007's; this rule has nothing to check on one server alone.

    ## Why is this bad?
    The spec makes names unique per server only. Clients that pass names through unprefixed must
    drop or rename one of the two, and even where a prefix keeps them apart the model sees two
    tools that differ only in a server key it may not weigh. Claude Code and Claude Desktop prefix
    `mcp__<key>__`, so there it is a note; for the others a warning. In a sample of 38 public servers
    41 tool names repeated.

    ## Example
    A `.mcp.json` with `github` and `gitlab` servers that both serve `create_issue`.

    Use instead: servers that prefix their own tool names (`github_create_issue`), or only one of
    the overlapping servers enabled.

    ## References
    - MCP 2025-11-25, tools: names unique within a server only.
      https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-names
    - Claude Code MCP docs: tools are exposed as `mcp__<server>__<tool>`.
      https://docs.anthropic.com/en/docs/claude-code/mcp
    """

    code = "SL027"
    name = "cross-server-name-collision"
    summary = "the same tool name on two servers of one client configuration (`--config` only)"
    severity: ClassVar[Mapping[str, Severity]] = COLLISION_LEVELS
