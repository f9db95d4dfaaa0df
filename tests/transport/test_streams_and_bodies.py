"""Standing GET streams and request bodies at the MCP endpoint (red-team pass 2, items 4, 5, 7, 9, 10).

Before: 100 concurrent GETs of one session opened 27 standing streams (the SDK's one-stream check
runs before its stream is registered); a GET with `Last-Event-ID` and no event store got 500; a
request with a wrong token had its whole body buffered before the 401 (a megabyte a connection,
held for the body timeout); `NaN`/`Infinity` reached a `float` handler; a body that is not a
JSON-RPC message got a 1.2 KB pydantic dump echoing the caller's input.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.helpers import free_port, python_server
from tests.transport.http_support import ACCEPT, ALICE, APP, MODES, VERSION, bearer, call, open_session


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"alice {ALICE}\n")
    return path


@pytest.fixture
def served(tokens_file: Path) -> Iterator[tuple[int, str]]:
    """A stateful SSE server with static tokens, and a session of alice's on it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), "--tokens", str(tokens_file)], port):
        yield port, open_session(url, bearer(ALICE)).headers["mcp-session-id"]


def _get_request(sid: str, extra: str = "") -> bytes:
    return (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        f"Authorization: Bearer {ALICE}\r\nMcp-Session-Id: {sid}\r\nMcp-Protocol-Version: {VERSION}\r\n"
        f"{extra}\r\n"
    ).encode()


def _get_stream(port: int, sid: str, extra: str = "") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(_get_request(sid, extra))
    return sock


def _status(sock: socket.socket, timeout: float = 5.0) -> int | None:
    sock.settimeout(timeout)
    try:
        line = sock.recv(64)
    except TimeoutError:
        return None
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None


def test_one_standing_get_stream_per_session(served: tuple[int, str]) -> None:
    port, sid = served
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
    for sock in socks:  # connected first, then sent together: the SDK's race
        sock.sendall(_get_request(sid))
    statuses: list[int | None] = []
    try:
        statuses = [_status(s) for s in socks]
        assert statuses.count(200) == 1, statuses
        assert statuses.count(409) == 99, statuses
    finally:
        for sock in socks:  # the stream ends with its connection; then the session may open another
            sock.close()
    deadline = time.monotonic() + 10
    while True:
        with _get_stream(port, sid) as again:
            status = _status(again)
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200


def test_last_event_id_without_an_event_store_is_ignored_not_a_500(served: tuple[int, str]) -> None:
    port, sid = served
    with _get_stream(port, sid, "Last-Event-ID: 5\r\n") as sock:
        assert _status(sock) == 200  # a fresh stream: there is nothing to replay


def test_a_wrong_token_is_refused_before_its_body_is_read(tokens_file: Path) -> None:
    port = free_port()
    with (
        python_server([APP, str(port), "--tokens", str(tokens_file)], port),
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        # a 1 MB body is announced, 1 KB of it sent, then nothing: the answer must not wait for the rest
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong-token-0123456789\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1048000\r\n\r\n" + b" " * 1024
        )
        assert _status(sock, timeout=5) == 401


@pytest.mark.parametrize("mode", ["sse-stateful", "json-stateless"])
def test_nan_and_infinity_are_not_json_numbers(mode: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), *MODES[mode]], port):
        sid = open_session(url, ACCEPT).headers.get("mcp-session-id")
        session = {**ACCEPT, "mcp-protocol-version": VERSION, **({"mcp-session-id": sid} if sid else {})}
        replies = {}
        for literal in ("NaN", "Infinity", "-Infinity", "1e999", "-2E+400"):
            body = json.dumps(call(3, "ratio", {"x": 0})).replace('"x": 0', f'"x": {literal}')
            replies[literal] = httpx2.post(url, headers=session, content=body, timeout=20)
        fine = httpx2.post(url, headers=session, json=call(4, "ratio", {"x": 1.5e300}), timeout=20)
        words = httpx2.post(
            url, headers=session, json=call(5, "echo", {"text": "NaN and Infinity"}), timeout=20
        )
    for literal, reply in replies.items():
        assert reply.status_code == 400, (literal, reply.text)
        assert reply.json()["error"]["code"] == -32700
        assert "x=nan" not in reply.text.lower() and "x=inf" not in reply.text.lower()
        assert "finite" in reply.json()["error"]["message"]
    assert fine.status_code == 200 and "x=1.5e+300" in fine.text
    assert words.status_code == 200 and "NaN and Infinity" in words.text


@pytest.mark.parametrize(
    "body",
    [
        b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"note":"caller-text-echoed"}}]',
        b"null",
        b"42",
        b'{"id": 1, "method": "caller-text-echoed"}',
        b'{"caller-text-echoed": ',
    ],
)
@pytest.mark.parametrize("mode", ["sse-stateful", "json-stateless"])
def test_a_body_that_is_no_json_rpc_message_gets_one_short_sentence(body: bytes, mode: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), *MODES[mode]], port) as running:
        reply = httpx2.post(url, headers=ACCEPT, content=body, timeout=20)
        log = running.log()
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    short = ["The request is not a valid JSON-RPC message.", "The request body is not valid JSON."]
    if mode == "sse-stateful":  # a well-formed non-initialize message without a session is refused first
        short.append("Bad Request: Missing session ID")
    assert message in short
    assert len(reply.content) < 200
    for leak in ("caller-text-echoed", "pydantic", "input_value", "JSONRPC", "\n"):
        assert leak not in reply.text
    assert "Traceback" not in log


def test_bodies_still_arriving_are_capped_all_callers_together() -> None:
    """Without auth every connection is a caller: many slow bodies at once are shed with 503
    (`max_arriving_body_bytes`), and the bytes come back when those requests end."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    limits = ["--max-body", "200000", "--max-arriving", "300000"]
    with python_server([APP, str(port), *limits], port):
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            for sock in socks:  # 4 x 120 KB of announced 200 KB bodies, then nothing
                sock.sendall(
                    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 200000\r\n\r\n" + b" " * 120_000
                )
                time.sleep(0.2)
            statuses = [_status(sock, timeout=2) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        assert 503 in statuses, statuses
        assert statuses.count(None) >= 2, statuses  # the others still wait for their bodies
        time.sleep(0.5)
        assert open_session(url, ACCEPT).status_code == 200
