"""SIGTERM drains `mcpkit sql serve --transport http` in every response mode: the calls in flight
all get their real answers (through the official client), new work is refused, the process exits.

Before the fix, the default SSE mode answered every call in flight with HTTP 200 and an empty
stream (sse-starlette ends SSE responses on uvicorn's exit flag); only --json-response drained.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from tests.helpers import free_port, python_server, text_of

SLOW_QUERY = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
    "SELECT count(*) AS n FROM c"
)
MODES = {
    "sse-stateful": [],
    "json-stateful": ["--json-response"],
    "sse-stateless": ["--stateless"],
    "json-stateless": ["--stateless", "--json-response"],
}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", list(MODES))
async def test_sigterm_lets_six_calls_in_flight_finish(mode: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [
        "-m",
        "mcpkit",
        "sql",
        "serve",
        "--demo",
        "--transport",
        "http",
        "--port",
        str(port),
        *MODES[mode],
    ]
    answers: dict[int, Any] = {}
    ready = anyio.Event()
    listed: list[int] = []

    async def caller(i: int) -> None:
        async with Client(url, mode="legacy") as client:
            await client.list_tools()  # the client fetches output schemas once, before the drain
            listed.append(i)
            if len(listed) == 6:
                ready.set()
            try:
                answers[i] = await client.call_tool("execute_query", {"query": SLOW_QUERY})
            except Exception as exc:  # what the drain must not produce
                answers[i] = exc

    with python_server(args, port) as running:
        started = 0.0
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(caller, i)
                await ready.wait()
                await anyio.sleep(0.4)  # the six calls are running
                running.proc.send_signal(signal.SIGTERM)
                started = time.monotonic()
                await anyio.sleep(0.2)
                try:
                    late = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code
                except httpx2.TransportError:
                    late = 0  # the listener already closed: also a refusal
            code = await anyio.to_thread.run_sync(running.proc.wait, 30)
        took = time.monotonic() - started
        log = running.log()
    failed = {i: a for i, a in answers.items() if isinstance(a, Exception) or a.is_error}
    assert not failed, (failed, log[-2000:])
    assert all("3000000" in text_of(a) for a in answers.values())
    assert late in (0, 503)
    assert code in (0, -signal.SIGTERM)
    assert took < 25, "the GET streams must end once the calls have answered, not at the graceful limit"
    assert '"outcome": "INTERNAL"' not in log
