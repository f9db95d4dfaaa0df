"""Without a principal, limits and caches count the client's connection, never the name it gives.

Over stdio (and the SDK's in-memory transport) one connection is one client: its calls share one
bucket; another connection introducing itself under the same `clientInfo` name gets its own.
"""

from __future__ import annotations

import pytest
from mcp import Client
from mcp_types import Implementation
from pydantic import BaseModel

from mcpkit import Context, Server, Tool

pytestmark = pytest.mark.anyio


class Q(BaseModel):
    q: str = "x"


async def ask(args: Q, ctx: Context) -> str:
    return args.q


def _client(server: Server, name: str) -> Client:
    return Client(server.lowlevel, mode="legacy", client_info=Implementation(name=name, version="1"))


async def test_one_connection_is_one_bucket_and_a_same_named_client_is_another() -> None:
    server = Server(
        "ids", tools=[Tool(name="ask", description="Answer.", input=Q, handler=ask, rate_limit_per_min=2)]
    )
    async with _client(server, "same") as first, _client(server, "same") as second:
        a = [(await first.call_tool("ask", {"q": str(i)})).is_error for i in range(3)]
        b = [(await second.call_tool("ask", {"q": str(i)})).is_error for i in range(2)]
    assert a == [False, False, True]  # one connection: the per-request session proxy is not the key
    assert b == [False, False]  # the same clientInfo name on another connection: its own bucket
