"""Helpers for testing mcpkit servers through the official SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from mcp import Client

from mcpkit.server import Server

__all__ = ["connect"]


@asynccontextmanager
async def connect(
    server: Server, *, mode: Literal["legacy", "auto"] = "legacy", **client_options: Any
) -> AsyncIterator[Client]:
    """An official SDK `Client` connected to `server` in memory.

    `mode="legacy"` runs the real JSON-RPC loop with the 2025-11-25 `initialize` handshake;
    `mode="auto"` uses the SDK's direct dispatcher on the 2026-07-28 stateless era.
    `client_options` go to `mcp.Client` (`logging_callback`, `client_info`, ...).
    """
    async with Client(server.lowlevel, mode=mode, **client_options) as client:
        yield client
