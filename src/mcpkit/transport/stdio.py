"""Serve an mcpkit server over stdio (the SDK's stdio transport; stdout carries only protocol)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from mcp.server.stdio import stdio_server

if TYPE_CHECKING:
    from mcpkit.server import Server

__all__ = ["run_stdio", "serve_stdio"]


async def serve_stdio(server: Server) -> None:
    """Serve `server` on this process's stdin/stdout until the client closes stdin."""
    lowlevel = server.lowlevel
    try:
        async with stdio_server() as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        await server.aclose()


def run_stdio(server: Server) -> None:
    """Blocking form of `serve_stdio`."""
    anyio.run(serve_stdio, server)
