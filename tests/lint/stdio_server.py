"""A tiny stdio MCP server for the live `mcpkit lint --stdio` tests.

Serves `TOOLS` three per page through `nextCursor`, so the linter must page. Built on the official
SDK's low-level `Server` (handlers as constructor arguments) and `stdio_server()`. The tool list
mixes good tools with shapes the SDK lets through but clients reject: a root `anyOf` (SL003) and
an array without `items` (SL004); the instructions are over Claude Code's 2048 units (SL005).
Run with `--exit` to exit at once (a server that will not start).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

PAGE = 3
INSTRUCTIONS = "Use search first. " * 130  # 2,340 UTF-16 units: over Claude Code's 2048


def _tool(i: int) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": f"tool_{i}",
        "description": f"Tool number {i}.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "description": "query"}}},
    }
    if i == 4:
        tool["inputSchema"]["anyOf"] = [{"required": ["q"]}, {"required": ["ids"]}]
    if i == 6:
        tool["inputSchema"]["properties"]["ids"] = {"type": "array", "description": "ids"}
    return tool


TOOLS = [_tool(i) for i in range(int(os.environ.get("LINT_FIXTURE_TOOL_COUNT", "8")))]
if os.environ.get("LINT_FIXTURE_EXTRA_TOOL"):  # proves the linter passes the caller's environment on
    TOOLS.append({**_tool(0), "name": os.environ["LINT_FIXTURE_EXTRA_TOOL"]})


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    page = TOOLS[start : start + PAGE]
    nxt = str(start + PAGE) if start + PAGE < len(TOOLS) else None
    tools = [types.Tool.model_validate(t) for t in page]
    return types.ListToolsResult(tools=tools, next_cursor=nxt)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


def build() -> Server[Any]:
    """The server, shared with the HTTP test."""
    return Server(
        "lint-fixture",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def main() -> None:
    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if "--exit" in sys.argv:
        print("refusing to start: --exit given", file=sys.stderr)
        raise SystemExit(3)
    anyio.run(main)
