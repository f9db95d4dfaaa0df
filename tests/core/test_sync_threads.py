"""A sync handler's thread cannot be stopped: a call cancelled or past its deadline answers at once,
but its thread keeps its place until the handler returns (issue 12). Without that, a caller could
cancel and re-send forever, each time leaving one more thread running outside every limit."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from pydantic import BaseModel, Field

from mcpkit import Context, DefinitionError, Server, Tool
from mcpkit.testing import connect
from tests.helpers import text_of

pytestmark = pytest.mark.anyio


class Wait(BaseModel):
    seconds: float = Field(ge=0, le=30)


class Gate:
    """Sync handlers that block until the test lets them go, counting the threads really running."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def block(self, args: Wait, ctx: Context) -> str:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            self.release.wait(args.seconds)
            return "released"
        finally:
            with self._lock:
                self.running -= 1

    def quick(self, args: Wait, ctx: Context) -> str:
        return "quick"


def server(gate: Gate, max_threads: int = 1, block_timeout_s: float = 0.3) -> Server:
    return Server(
        "threads",
        tools=[
            Tool(
                name="block",
                description="Block a while.",
                input=Wait,
                handler=gate.block,
                timeout_s=block_timeout_s,
            ),
            Tool(name="quick", description="Answer at once.", input=Wait, handler=gate.quick, timeout_s=0.5),
        ],
        max_threads=max_threads,
    )


async def wait_until(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        await anyio.sleep(0.02)


async def test_a_timed_out_sync_call_keeps_its_thread_place_until_it_returns() -> None:
    gate = Gate()
    srv = server(gate)
    async with connect(srv) as client:
        late = await client.call_tool("block", {"seconds": 20})
        assert (late.meta or {})["mcpkit/error"]["code"] == "TIMEOUT"
        assert gate.running == 1 and srv.threads.lingering == 1  # answered, the thread runs on
        waited = await client.call_tool("quick", {"seconds": 0})
        assert (waited.meta or {})["mcpkit/error"]["code"] == "TIMEOUT"  # no place for it
        gate.release.set()
        await wait_until(lambda: srv.threads.lingering == 0)
        after = await client.call_tool("quick", {"seconds": 0})
    assert text_of(after) == "quick"


async def test_a_cancelled_sync_call_keeps_its_thread_place_until_it_returns() -> None:
    gate = Gate()
    srv = server(gate, block_timeout_s=20.0)
    async with connect(srv) as client:
        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("block", {"seconds": 20})  # the client sends notifications/cancelled
        assert scope.cancelled_caught
        await wait_until(lambda: srv.threads.lingering == 1)
        assert gate.running == 1
        waited = await client.call_tool("quick", {"seconds": 0})
        assert (waited.meta or {})["mcpkit/error"]["code"] == "TIMEOUT"
        gate.release.set()
        await wait_until(lambda: srv.threads.lingering == 0)
        after = await client.call_tool("quick", {"seconds": 0})
    assert text_of(after) == "quick"


async def test_cancel_and_resend_never_runs_more_threads_than_the_limit() -> None:
    gate = Gate()
    srv = server(gate, max_threads=2, block_timeout_s=20.0)
    async with connect(srv) as client:
        for _ in range(6):
            with anyio.move_on_after(0.2):
                await client.call_tool("block", {"seconds": 3})
        assert gate.peak <= 2
        gate.release.set()
        await wait_until(lambda: srv.threads.lingering == 0)
        assert text_of(await client.call_tool("quick", {"seconds": 0})) == "quick"
    assert gate.peak == 2


def test_max_threads_is_checked() -> None:
    with pytest.raises(DefinitionError, match="max_threads"):
        server(Gate(), max_threads=0)
