"""Faults: the shared Redis stops mid-run and comes back; a client walks away mid-call."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from pydantic import BaseModel

from mcpkit import Context, Server, Tool
from tests.conftest import need
from tests.helpers import free_port, python_server, wait_for_port

pytestmark = pytest.mark.anyio


class Q(BaseModel):
    q: str = "x"


@contextmanager
def private_redis(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """A Redis of our own on `port`, so stopping it does not disturb anything else."""
    binary = shutil.which("redis-server")
    if binary is None:
        need("redis-server", "the redis-server binary is not installed")
    proc = subprocess.Popen(
        [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.redis
async def test_redis_stopping_mid_run_follows_each_limits_choice_then_recovers(redis_url: str) -> None:
    computed = 0

    async def lookup(args: Q, ctx: Context) -> str:
        nonlocal computed
        computed += 1
        return f"value {args.q}"

    port = free_port()
    tools = [
        Tool(name="open", description="Fails open.", input=Q, handler=lookup, rate_limit_per_min=1000),
        Tool(name="cached", description="Cached.", input=Q, handler=lookup, cache_ttl_s=60),
    ]
    with private_redis(port) as redis:
        url = f"redis://127.0.0.1:{port}/0"
        fail_open = Server("faults-open", tools=tools, redis_url=url, on_limit_outage="allow")
        fail_closed = Server("faults-closed", tools=tools, redis_url=url)
        async with (
            Client(fail_open.lowlevel, mode="legacy") as a,
            Client(fail_closed.lowlevel, mode="legacy") as b,
        ):
            assert not (await a.call_tool("open", {})).is_error
            assert not (await b.call_tool("open", {})).is_error
            await a.call_tool("cached", {"q": "k"})
            await a.call_tool("cached", {"q": "k"})
            assert computed == 3  # the second cached call was served from Redis
            redis.terminate()
            redis.wait(timeout=10)
            during_open = await a.call_tool("open", {})
            during_closed = await b.call_tool("open", {})
            during_cache = await a.call_tool("cached", {"q": "k"})
    assert not during_open.is_error  # fail open: served without a limit
    error = (during_closed.meta or {})["mcpkit/error"]
    assert error["code"] == "RATE_LIMITED"  # fail closed: refused, retryable
    assert error["retryable"] is True
    assert not during_cache.is_error  # the cache is an optimisation: computed without it
    with private_redis(port):
        async with Client(fail_closed.lowlevel, mode="legacy") as b:
            assert not (await b.call_tool("open", {})).is_error  # recovered with Redis back


def test_client_walking_away_mid_call_leaves_the_server_serving() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"seconds": 3}},
    }
    with python_server(
        ["tests/servers/http_app.py", str(port), "--stateless", "--json", "--max-concurrent", "1"], port
    ) as running:
        with pytest.raises(httpx2.ReadTimeout):
            httpx2.post(url, headers=headers, json=body, timeout=0.5)  # the client gives up and disconnects
        deadline = time.monotonic() + 10
        while True:  # the server keeps serving other calls
            reply = httpx2.post(
                url, headers=headers, json={**body, "params": {"name": "echo", "arguments": {"text": "back"}}}
            )
            if reply.status_code == 200 or time.monotonic() > deadline:
                break
            anyio.run(anyio.sleep, 0.2)
        assert reply.status_code == 200
        assert reply.json()["result"]["content"][0]["text"] == "back"
        assert running.proc.poll() is None
