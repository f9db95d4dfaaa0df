"""The per-caller concurrency gate is keyed on who the caller provably is, in every response mode.

The attacks of issue 12: one token holder sends five concurrent slow calls, each with its own
session (stateful) or a made-up `Mcp-Session-Id` (stateless), or with a second `Authorization`
header after the real one. The limit is 2: two calls run, three get 429, whatever the headers.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.helpers import free_port, python_server, text_of
from tests.transport.http_support import (
    ACCEPT,
    ALICE,
    APP,
    BOB,
    MODES,
    VERSION,
    answer_text,
    bearer,
    call,
    open_session,
)


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"alice {ALICE}\nbob {BOB}\n")
    return path


def _concurrently(url: str, headers: list[list[tuple[str, str]]]) -> list[int]:
    statuses: list[int] = []

    def one(i: int) -> None:
        reply = httpx2.post(url, headers=headers[i], json=call(i, "sleep", {"seconds": 1.0}), timeout=20)
        statuses.append(reply.status_code)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(headers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(statuses)


@pytest.mark.parametrize("mode", list(MODES))
def test_one_principal_gets_its_limit_whatever_session_ids_it_sends(mode: str, tokens_file: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    stateful = "--stateless" not in MODES[mode]
    args = [APP, str(port), *MODES[mode], "--tokens", str(tokens_file), "--max-concurrent", "2"]
    with python_server(args, port):
        alice = bearer(ALICE)
        if stateful:  # five real sessions of one principal
            sessions = [open_session(url, alice).headers["mcp-session-id"] for _ in range(5)]
        else:  # five made-up session ids
            sessions = [uuid.uuid4().hex for _ in range(5)]
        per_session = [
            [*alice.items(), ("mcp-session-id", sid), ("mcp-protocol-version", VERSION)] for sid in sessions
        ]
        assert _concurrently(url, per_session) == [200, 200, 429, 429, 429]
        # another principal is not held back by alice's calls
        bob = bearer(BOB)
        bob_session = open_session(url, bob).headers.get("mcp-session-id") if stateful else None
        bob_headers = {
            **bob,
            "mcp-protocol-version": VERSION,
            **({"mcp-session-id": bob_session} if bob_session else {}),
        }
        mixed = [*per_session[:2], list(bob_headers.items())]
        assert _concurrently(url, mixed) == [200, 200, 200]
        reply = httpx2.post(url, headers=bob_headers, json=call(9, "whoami", {}), timeout=20)
        assert answer_text(reply) == "bob"


@pytest.mark.parametrize("mode", ["sse-stateful", "json-stateless"])
def test_repeated_identity_headers_are_refused(mode: str, tokens_file: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), *MODES[mode], "--tokens", str(tokens_file)], port):
        alice = bearer(ALICE)
        sid = open_session(url, alice).headers.get("mcp-session-id") or uuid.uuid4().hex
        base = [
            ("Accept", alice["Accept"]),
            ("Content-Type", "application/json"),
            ("mcp-protocol-version", VERSION),
        ]
        token = ("Authorization", f"Bearer {ALICE}")
        attacks = {
            "second Authorization": [
                *base,
                token,
                ("Authorization", f"Bearer {uuid.uuid4().hex}"),
                ("mcp-session-id", sid),
            ],
            "second Mcp-Session-Id": [
                *base,
                token,
                ("mcp-session-id", sid),
                ("mcp-session-id", uuid.uuid4().hex),
            ],
            "second Content-Type": [*base, token, ("Content-Type", "text/plain"), ("mcp-session-id", sid)],
        }
        statuses = {
            name: httpx2.post(url, headers=headers, json=call(1, "whoami", {}), timeout=20).status_code
            for name, headers in attacks.items()
        }
        fine = httpx2.post(url, headers=[*base, token, ("mcp-session-id", sid)], json=call(2, "whoami", {}))
    assert statuses == dict.fromkeys(attacks, 400)
    assert fine.status_code == 200
    assert answer_text(fine) == "alice"


def _post(port: int, headers: dict[str, str], body: dict[str, object]) -> socket.socket:
    """A raw connection that has sent the POST of `body`."""
    data = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(data)}\r\n\r\n"
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(request.encode() + data)
    return sock


@pytest.mark.parametrize("tool", ["sleep", "block"])
@pytest.mark.parametrize("mode", list(MODES))
def test_walking_away_from_an_answer_does_not_free_the_slot(mode: str, tool: str, tokens_file: Path) -> None:
    """The slot is held until the call ends, not until the client stops listening (issue 12 red team).

    In SSE mode the SDK's app returns once the client closes the connection, while the call runs on:
    40 abandoned slow calls all ran at once under a limit of 16. In sse-stateless mode walking away
    cancels the call: an async one (`sleep`) ends then and frees its slot, a sync one (`block`) runs
    on in its thread and keeps the slot until it returns (second red team: 60 threads for one caller).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    stateful = "--stateless" not in MODES[mode]
    args = [APP, str(port), *MODES[mode], "--tokens", str(tokens_file), "--max-concurrent", "2"]
    with python_server(args, port):
        alice = {**bearer(ALICE), "mcp-protocol-version": VERSION}
        if stateful:
            alice["mcp-session-id"] = open_session(url, bearer(ALICE)).headers["mcp-session-id"]
        socks = [_post(port, alice, call(i, tool, {"seconds": 4.0})) for i in (1, 2)]
        if "--json" in MODES[mode]:  # a JSON answer comes only at the end: walk away before it
            time.sleep(1.0)
        else:  # an SSE answer starts at once: read its status line, then walk away
            assert [sock.recv(12) for sock in socks] == [b"HTTP/1.1 200"] * 2
            # once the handlers run: a call cancelled before its thread starts rightly frees its slot
            time.sleep(1.0)
        for sock in socks:
            sock.close()
        time.sleep(0.5)
        third = httpx2.post(url, headers=alice, json=call(2, "whoami", {}), timeout=20).status_code
        time.sleep(4.0)  # the two abandoned calls have ended
        after = httpx2.post(url, headers=alice, json=call(3, "whoami", {}), timeout=20)
    if mode == "sse-stateless" and tool == "sleep":  # its stream ended: the calls were cancelled
        assert third == 200
    else:
        assert third == 429, "the two abandoned calls still run: alice is at her limit"
    assert after.status_code == 200
    assert answer_text(after) == "alice"


@pytest.mark.parametrize("trusted", [False, True])
def test_x_forwarded_for_does_not_make_the_caller(trusted: bool) -> None:
    """Without auth each connection is its own caller, whatever X-Forwarded-For says.

    uvicorn believes X-Forwarded-For from 127.0.0.1 by default, so a client named its own caller key
    and could fill another client's session quota; now only `forwarded_allow_ips` makes uvicorn's
    rewrite happen, and limits key on the connection even then.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [APP, str(port), "--sessions-per-client", "2"]
    if trusted:
        args += ["--forwarded-allow-ips", "127.0.0.1"]
    forwarded = {**ACCEPT, "X-Forwarded-For": "203.0.113.7"}
    with python_server(args, port):
        statuses = [open_session(url, forwarded).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 200]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse-stateful", "json-stateful"])
async def test_a_cancelled_sync_call_holds_its_slot_until_its_thread_ends(
    mode: str, tokens_file: Path
) -> None:
    """A sync handler's thread cannot be stopped: the cancelled call ends at once, but its thread
    keeps the caller's slot until it returns, or cancel-and-resend would void the limit.

    Through the official client, which sends `notifications/cancelled` when a call is abandoned;
    that notification itself passes the gate at the limit (it starts no work and ends some). In the
    stateless modes a cancel cannot reach a call (each POST is its own transport), so the call runs
    to its end holding its slot (`test_walking_away_from_an_answer_does_not_free_the_slot`).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [APP, str(port), *MODES[mode], "--tokens", str(tokens_file), "--max-concurrent", "2"]
    with python_server(args, port) as running:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=20)
        async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            await client.list_tools()  # the client checks results against the listing: fetch it now

            async def cancelled_block() -> None:
                with anyio.move_on_after(1.0):
                    await client.call_tool("block", {"seconds": 5.0})

            async with anyio.create_task_group() as group:
                for _ in range(2):
                    group.start_soon(cancelled_block)
            deadline = time.monotonic() + 10
            while running.log().count('"outcome": "CANCELLED"') < 2:  # both cancels arrived
                assert time.monotonic() < deadline, running.log()[-2000:]
                await anyio.sleep(0.05)
            with pytest.raises(MCPError, match="Too many concurrent requests"):
                await client.call_tool("whoami", {})  # both threads still run: alice is at her limit
            while running.log().count("the thread left behind has ended") < 2:
                assert time.monotonic() < deadline + 10, running.log()[-2000:]
                await anyio.sleep(0.05)
            after = await client.call_tool("whoami", {})
    assert running.log().count("its thread runs on") == 2
    assert text_of(after) == "alice"


def test_only_a_body_of_cancellations_passes_the_gate_at_the_limit() -> None:
    from mcpkit.transport.guard import BODY_STATE_KEY, sends_only_cancellations

    def scope(body: object) -> dict[str, object]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return {"state": {BODY_STATE_KEY: [{"type": "http.request", "body": raw, "more_body": False}]}}

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    assert sends_only_cancellations(scope(cancel))
    assert sends_only_cancellations(scope([cancel, cancel]))
    assert not sends_only_cancellations(scope([cancel, call(4, "sleep", {"seconds": 1})]))
    assert not sends_only_cancellations(scope({**cancel, "id": 5}))  # a request, not a notification
    assert not sends_only_cancellations(scope(b"notifications/cancelled"))
    assert not sends_only_cancellations(scope([]))
    assert not sends_only_cancellations(scope({**cancel, "pad": "x" * 5000}))
    assert not sends_only_cancellations({})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse-stateful", "json-stateless"])
async def test_sync_calls_past_their_deadline_hold_their_slots_until_their_threads_end(
    mode: str, tokens_file: Path
) -> None:
    """A sync tool past its deadline answers TIMEOUT at once, but its thread runs on and keeps its
    caller's slot (second red team: 16 x 4 rounds of timed-out calls left 64 threads running for one
    caller limited to 16). Rounds sent while the threads run are refused; none adds a thread."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [APP, str(port), *MODES[mode], "--tokens", str(tokens_file), "--max-concurrent", "2"]
    with python_server(args, port) as running:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=20)
        async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            await client.list_tools()
            base = _threads(running.proc.pid)
            rounds: list[list[str]] = []
            for _ in range(4):
                answers: list[str] = []

                async def one(answers: list[str] = answers) -> None:
                    try:
                        result = await client.call_tool("block_deadline", {"seconds": 5.0})
                        answers.append((result.meta or {})["mcpkit/error"]["code"])
                    except MCPError as exc:
                        answers.append("429" if "Too many concurrent" in exc.message else exc.message)

                async with anyio.create_task_group() as group:
                    for _ in range(2):
                        group.start_soon(one)
                rounds.append(sorted(answers))
            peak = _threads(running.proc.pid) - base
            deadline = time.monotonic() + 15
            while running.log().count("the thread left behind has ended") < 2:
                assert time.monotonic() < deadline, running.log()[-2000:]
                await anyio.sleep(0.05)
            after = await client.call_tool("whoami", {})
    assert rounds[0] == ["TIMEOUT", "TIMEOUT"]
    assert rounds[1:] == [["429", "429"]] * 3
    assert peak <= 4, f"{peak} more threads: the refused rounds must not start any"
    assert text_of(after) == "alice"


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])
