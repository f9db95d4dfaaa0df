"""Helpers for testing mcpkit servers through the official SDK client.

`connect(server)` gives an official `mcp.Client` on the server in memory; `connect(server,
egress=MockEgress({...}))` also routes the server's `ctx.fetch` to in-process handlers per host,
with the whole egress policy still applied (see `mcpkit.egress.mock`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any, Literal

from mcp import Client

from mcpkit.egress.mock import EgressHandler, MockEgress
from mcpkit.server import Server

__all__ = ["EgressHandler", "MockEgress", "connect"]


@asynccontextmanager
async def connect(
    server: Server,
    *,
    mode: Literal["legacy", "auto"] = "legacy",
    egress: MockEgress | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """An official SDK `Client` connected to `server` in memory.

    `mode="legacy"` runs the real JSON-RPC loop with the 2025-11-25 `initialize` handshake;
    `mode="auto"` uses the SDK's direct dispatcher on the 2026-07-28 stateless era.
    `egress` routes the server's egress to in-process handlers while connected.
    `client_options` go to `mcp.Client` (`logging_callback`, `client_info`, ...).
    """
    with ExitStack() as stack:
        if egress is not None:
            stack.enter_context(egress.installed(server.egress))
        async with Client(server.lowlevel, mode=mode, **client_options) as client:
            yield client
