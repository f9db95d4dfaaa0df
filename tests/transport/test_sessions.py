"""Sessions: a quota per caller, a total for the server, and memory freed when a session ends.

Before: one token holder could open the SDK's default 10,000 sessions and lock everyone out (503).
Now a caller (its verified principal) holds at most `--sessions-per-client`, the server at most
`--max-sessions`; a session's memory goes when it ends by DELETE or idle expiry (measured here
with tracemalloc in the serving process).
"""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from pydantic import BaseModel

from mcpkit import Context, Server, Tool
from tests.helpers import free_port, python_server
from tests.transport.http_support import ALICE, APP, BOB, MODES, VERSION, bearer, call, open_session


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"alice {ALICE}\nbob {BOB}\n")
    return path


def _delete(url: str, headers: dict[str, str], sid: str) -> int:
    return httpx2.delete(
        url, headers={**headers, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    ).status_code


@pytest.mark.parametrize("mode", list(MODES))
def test_session_quota_per_principal_and_total(mode: str, tokens_file: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    limits = ["--sessions-per-client", "3", "--max-sessions", "5"]
    alice, bob = bearer(ALICE), bearer(BOB)
    with python_server([APP, str(port), *MODES[mode], "--tokens", str(tokens_file), *limits], port):
        if "--stateless" in MODES[mode]:  # no session table to fill: every initialize is answered
            replies = [open_session(url, alice) for _ in range(8)]
            assert [r.status_code for r in replies] == [200] * 8
            assert not any("mcp-session-id" in r.headers for r in replies)
            return
        mine = [open_session(url, alice) for _ in range(4)]
        assert [r.status_code for r in mine] == [200, 200, 200, 429]  # alice's quota
        theirs = [open_session(url, bob) for _ in range(3)]
        assert [r.status_code for r in theirs] == [200, 200, 503]  # the server's total
        # a DELETE gives the slot back at once
        assert _delete(url, alice, mine[0].headers["mcp-session-id"]) in (200, 204)
        assert open_session(url, bob).status_code == 200
        assert open_session(url, alice).status_code == 503  # the total again, not alice's quota
        # sessions of the others still answer
        sid = mine[1].headers["mcp-session-id"]
        headers = {**alice, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
        assert httpx2.post(url, headers=headers, json=call(3, "whoami", {})).status_code == 200
        # alice ends hers: her quota comes back (idle expiry does the same: see the memory test)
        for reply in mine[1:3]:
            assert _delete(url, alice, reply.headers["mcp-session-id"]) in (200, 204)
        assert [open_session(url, alice).status_code for _ in range(3)] == [200, 200, 503]


class _Text(BaseModel):
    text: str = ""


async def _echo(args: _Text, ctx: Context) -> str:
    return args.text


@pytest.fixture
def in_process(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """A server in this process (uvicorn in a thread), so tracemalloc sees its memory."""
    server = Server(
        "mem", tools=[Tool(name="echo", description="Echo the text.", input=_Text, handler=_echo)]
    )
    idle = 1.0 if request.param == "idle expiry" else 600.0
    app = server.http_app(session_idle_timeout_s=idle, max_sessions=1000, max_sessions_per_client=1000)
    port = free_port()
    runner = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not runner.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", app
    runner.should_exit = True
    thread.join(10)


def _used() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.mark.parametrize("in_process", ["DELETE", "idle expiry"], indirect=True)
def test_a_sessions_memory_is_freed_when_it_ends(
    in_process: tuple[str, Any], request: pytest.FixtureRequest
) -> None:
    url, app = in_process
    ending = request.node.callspec.params["in_process"]
    n = 100
    with httpx2.Client(timeout=20) as client:
        plain = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

        def one() -> str:
            reply = client.post(url, headers=plain, json=_init())
            sid = reply.headers["mcp-session-id"]
            headers = {**plain, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            client.post(url, headers=headers, json=call(2, "echo", {"text": "x"}))
            return sid

        for _ in range(10):  # warm up every code path and cache first
            client.delete(url, headers={**plain, "mcp-session-id": one(), "mcp-protocol-version": VERSION})
        tracemalloc.start()
        try:
            before = _used()
            sids = [one() for _ in range(n)]
            opened = _used()
            if ending == "DELETE":
                for sid in sids:
                    headers = {**plain, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
                    gone = client.delete(url, headers=headers)
                    assert gone.status_code in (200, 204), (sids.index(sid), gone.text)
            else:
                time.sleep(2.5)  # idle timeout 1 s
            sids.clear()
            time.sleep(0.5)
            after = _used()
        finally:
            tracemalloc.stop()
    per_open = (opened - before) / n
    per_left = (after - before) / n
    print(f"{ending}: {per_open / 1024:.1f} KiB per open session, {per_left / 1024:.2f} KiB left after")
    assert app.state.sessions.open_sessions() == 0
    assert app.state.sessions.callers() == {}  # every caller's quota slot came back
    assert per_left < 2 * 1024
    if ending == "DELETE":  # (with a 1 s idle timeout, sessions expire while others are opened)
        assert per_open > 8 * 1024  # the measurement sees the sessions at all


def _init() -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "m", "version": "1"},
        },
    }


@pytest.mark.parametrize("mode", ["sse-stateful", "json-stateful"])
def test_concurrent_opens_past_the_quota_get_429_never_503(mode: str, tokens_file: Path) -> None:
    """Before: 24 initializes at once with a quota of 4 got 4x200, 8x429 and 12x503 (the SDK's
    server-wide "Too many open sessions", which a balancer reads as an overloaded replica). The
    gate now reserves the caller's place before the request goes on."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    alice = bearer(ALICE)
    with python_server(
        [APP, str(port), *MODES[mode], "--tokens", str(tokens_file), "--sessions-per-client", "4"], port
    ):
        for _ in range(2):
            barrier = threading.Barrier(24)
            replies: list[httpx2.Response] = []

            def open_one(barrier: threading.Barrier, replies: list[httpx2.Response]) -> None:
                barrier.wait()
                replies.append(httpx2.post(url, headers=alice, json=_init(), timeout=30))

            threads = [threading.Thread(target=open_one, args=(barrier, replies)) for _ in range(24)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            statuses = sorted(r.status_code for r in replies)
            assert statuses == [200] * 4 + [429] * 20, statuses
            for reply in replies:  # give the quota back for the next round
                if reply.status_code == 200:
                    assert _delete(url, alice, reply.headers["mcp-session-id"]) in (200, 204)
