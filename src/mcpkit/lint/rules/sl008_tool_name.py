"""SL008: a tool name outside the spec's pattern or a client's (length 64, `.` and `/`, prefix budget)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register

_SPEC = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_API = re.compile(r"[A-Za-z0-9_\-]{1,64}")
_GEMINI = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")
#: Claude Code exposes `mcp__<server>__<tool>`, which must fit the Claude API's 64.
_CLAUDE_CODE_PREFIX = len("mcp__") + len("__")
_CLAUDE_CODE_MAX = 64
#: Cursor: server name + tool name.
_CURSOR_MAX = 60
_VSCODE_MAX = 128
#: The config key length assumed when the real key is unknown: the median of the keys in the
#: servers' own README install snippets is about this long ("github", "filesystem", "playwright").
DEFAULT_KEY_LENGTH = 10


@register
class ToolNamePattern(Rule):
    """## What it does
    Checks each tool name against the spec's pattern and each client's: characters, length, and the
    room left once a client prefixes the server name.

    ## Why is this bad?
    The spec says names SHOULD be 1-128 characters of `A-Za-z0-9_-.` (SEP-986 and the conformance
    suite use 1-64 and allow `/`). The Claude and OpenAI APIs require `^[a-zA-Z0-9_-]{1,64}$` and
    reject the whole request otherwise ("tools.46.custom.name: String should have at most 64
    characters"); Gemini requires a letter or `_` first and at most 64. Claude Code names tools
    `mcp__<key>__<tool>`, which must still fit 64; Cursor limits key plus tool name to 60; Copilot to
    128. The prefix is the key the *user* gives the server in the client's config (`"github"` in
    `{"mcpServers": {"github": {...}}}`), not the server's `serverInfo.name`: pass it with
    `--server-key` (or lint the whole config with `--config`). Without it the budget assumes a
    10-character key and the finding is a warning, since the real key may be shorter.

    ## Example
    ```json
    {"name": "github.search/issues", "inputSchema": {"type": "object"}}
    ```

    Use instead:
    ```json
    {"name": "search_issues", "inputSchema": {"type": "object"}}
    ```

    ## References
    - MCP 2025-11-25, tool names and SEP-986.
      https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-names
    - Claude tool use: `^[a-zA-Z0-9_-]{1,64}$`; getsentry/XcodeBuildMCP#3: the 400 in Claude Code.
      https://docs.anthropic.com/en/docs/build-with-claude/tool-use
      https://github.com/getsentry/XcodeBuildMCP/issues/3
    - Vertex AI FunctionDeclaration: starts with a letter or `_`, max 64.
      https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1/Tool#FunctionDeclaration
    - anthropics/claude-code#19882: `mcp__server__tool` over 64 fails.
      https://github.com/anthropics/claude-code/issues/19882
    - microsoft/vscode#243602: Copilot's 1-128; codex#1289 (reported): Cursor's 60.
      https://github.com/microsoft/vscode/issues/243602
    """

    code = "SL008"
    name = "invalid-tool-name"
    summary = (
        "tool name outside the spec's pattern, or outside a client's (length 64, `.` and `/`, prefix budget)"
    )
    severity: ClassVar[Mapping[str, Severity]] = {
        "claude-code": "error",
        "claude-api": "error",
        "openai-strict": "error",
        "gemini": "error",
        "cursor": "warning",
        "vscode": "warning",
        "windsurf": "error",
        "spec": "warning",
    }

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        name = tool.raw.get("name")
        if not isinstance(name, str) or not name:
            yield from self.report(
                tool,
                "/name",
                "the tool has no name (a non-empty string is required)",
                dict.fromkeys(self.severity, "error"),
            )
            return
        problems: list[tuple[str, dict[str, Severity]]] = []
        if not _SPEC.fullmatch(name):
            problems.append(("outside the spec's 1-128 of [A-Za-z0-9_.-]", {"spec": "warning"}))
        if not _API.fullmatch(name):
            problems.append(
                ("outside ^[a-zA-Z0-9_-]{1,64}$", {"claude-api": "error", "openai-strict": "error"})
            )
        if not _GEMINI.fullmatch(name):
            problems.append(("outside Gemini's [A-Za-z_][A-Za-z0-9_.:-]{0,63}", {"gemini": "error"}))
        key = self.ctx.server_key
        # An assumed key can only warn: the real one may be shorter.
        prefix_level: Severity = "error" if key else "warning"
        key_len = len(key) if key else DEFAULT_KEY_LENGTH
        assumed = (
            ""
            if key
            else f" (assuming a {DEFAULT_KEY_LENGTH}-character config key; give it with --server-key)"
        )
        full = _CLAUDE_CODE_PREFIX + key_len + len(name)
        if full > _CLAUDE_CODE_MAX:
            problems.append(
                (
                    f"mcp__{key or '<key>'}__{name} is {full} characters, "
                    f"over Claude Code's {_CLAUDE_CODE_MAX}{assumed}",
                    {"claude-code": prefix_level},
                )
            )
        if key_len + len(name) > _CURSOR_MAX:
            problems.append(
                (
                    f"config key plus tool name is {key_len + len(name)} characters, "
                    f"over Cursor's {_CURSOR_MAX}"
                    f"{assumed}",
                    {"cursor": "warning"},
                )
            )
        if len(name) > _VSCODE_MAX:
            problems.append((f"longer than Copilot's {_VSCODE_MAX}", {"vscode": "warning"}))
        selected = [
            (text, levels) for text, levels in problems if any(p in self.ctx.profiles for p in levels)
        ]
        if selected:
            merged: dict[str, Severity] = {}
            for _, levels in selected:
                merged |= levels
            yield from self.report(
                tool, "/name", f"tool name {name!r}: " + "; ".join(t for t, _ in selected), merged
            )
