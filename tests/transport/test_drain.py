"""SIGTERM drains `mcpkit sql serve --transport http` in every response mode: the calls in flight
all get their real answers (through the official client), new work is refused, the process exits.

Before the fix, the default SSE mode answered every call in flight with HTTP 200 and an empty
stream (sse-starlette ends SSE responses on uvicorn's exit flag); only --json-response drained.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from tests.helpers import free_port, python_server, text_of
from tests.transport.http_support import ACCEPT, APP, INIT, VERSION, call, open_session
from tests.transport.http_support import MODES as HTTP_MODES

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


def _send_across_sigterm(port: int, proc: Any, headers: dict[str, str], body: dict[str, Any]) -> bytes:
    """Send a request's head and the start of its body, SIGTERM the server, then the rest: the answer."""
    data = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(data)}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(request + data[:10])
        time.sleep(0.5)  # the head has reached the app; the body has not
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        sock.sendall(data[10:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("mode", list(HTTP_MODES))
def test_a_call_still_sending_its_body_at_sigterm_is_answered(mode: str) -> None:
    """The drain counts a request from its arrival: before, a call whose body was still arriving was not
    counted, so with nothing else in flight the SSE modes answered 200 with an empty stream."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), *HTTP_MODES[mode]], port) as running:
        headers = {**ACCEPT, "mcp-protocol-version": VERSION}
        if "--stateless" not in HTTP_MODES[mode]:
            headers["mcp-session-id"] = open_session(url, ACCEPT).headers["mcp-session-id"]
        answer = _send_across_sigterm(port, running.proc, headers, call(7, "echo", {"text": "drained"}))
        assert running.proc.wait(20) in (0, -signal.SIGTERM)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b'"text":"drained"' in answer, answer[-300:]


def test_an_initialize_still_sending_its_body_at_sigterm_opens_its_session() -> None:
    port = free_port()
    with python_server([APP, str(port)], port) as running:
        answer = _send_across_sigterm(port, running.proc, ACCEPT, INIT)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b"mcp-session-id:" in answer.lower()
    assert b'"protocolVersion"' in answer, answer[-300:]
