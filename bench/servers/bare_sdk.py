"""Peer: one echo tool on the official SDK's bare low-level server (no validation, no policy)."""

import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="echo",
    description="Echo the text.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def list_tools(ctx, params):  # type: ignore[no-untyped-def]
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):  # type: ignore[no-untyped-def]
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("bare", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def stdio() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(stdio)
    else:
        import uvicorn

        uvicorn.run(
            server.streamable_http_app(json_response=sys.argv[3] == "json"),
            host="127.0.0.1",
            port=int(sys.argv[2]),
            log_level="warning",
        )
