"""Slow clients are cut: a request head or body that trickles in, or a connection that sends nothing.

uvicorn (0.55) bounds only the idle time between requests; before this fix 150 trickling
connections stayed open for as long as the attacker liked. Here the head and body timeouts are
1 s; the slowloris is bounded to 50 connections and 6 s, and the server keeps answering others.
"""

from __future__ import annotations

import select
import socket
import time

import httpx2

from tests.helpers import free_port, python_server
from tests.transport.http_support import APP

CONNECTIONS = 50
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def _cut(sock: socket.socket) -> bool:
    """Whether the server has closed `sock` (a 408 may come first)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        data = sock.recv(4096)
    except OSError:
        return True
    return not data or data.startswith(b"HTTP/1.1 408")


def _slowloris(port: int, first: bytes, drip: bytes, seconds: float) -> dict[int, float]:
    """Open the connections, send `first`, then `drip` every 0.2 s; when was each one cut?"""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(CONNECTIONS)]
    started = time.monotonic()
    cut: dict[int, float] = {}
    try:
        for sock in socks:
            if first:
                sock.sendall(first)
        while len(cut) < CONNECTIONS and time.monotonic() - started < seconds:
            time.sleep(0.2)
            for i, sock in enumerate(socks):
                if i in cut:
                    continue
                if _cut(sock):
                    cut[i] = time.monotonic() - started
                    continue
                try:
                    if drip:
                        sock.sendall(drip)
                except OSError:
                    cut[i] = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    return cut


def test_trickling_heads_silent_connections_and_slow_bodies_are_cut() -> None:
    port = free_port()
    args = [APP, str(port), "--json", "--stateless", "--head-timeout", "1", "--body-timeout", "1"]
    with python_server(args, port):
        heads = _slowloris(port, HEAD, b"X-Slow: 1\r\n", seconds=6)
        assert len(heads) == CONNECTIONS, f"{CONNECTIONS - len(heads)} trickling heads still open after 6 s"
        assert max(heads.values()) < 5  # 1 s plus scheduling on a busy machine
        silent = _slowloris(port, b"", b"", seconds=6)
        assert len(silent) == CONNECTIONS, "connections that send nothing must be closed too"
        body_head = HEAD + b"Accept: application/json\r\nContent-Length: 1000\r\n\r\n{"
        bodies = _slowloris(port, body_head, b" ", seconds=6)
        assert len(bodies) == CONNECTIONS, "trickling bodies must be cut"
        # the server answered others all along
        assert httpx2.get(f"http://127.0.0.1:{port}/healthz").text == "ok"


def test_a_slow_body_gets_408() -> None:
    port = free_port()
    args = [APP, str(port), "--json", "--stateless", "--body-timeout", "1"]
    with python_server(args, port), socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(HEAD + b"Accept: application/json\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(1.5)
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 408"), reply


def _closed(sock: socket.socket) -> bool:
    """Whether the server has closed `sock`, reading past any answer it sent first."""
    while True:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        try:
            if not sock.recv(65536):
                return True
        except OSError:
            return True


_HUGE = b"Host: 127.0.0.1\r\nContent-Length: 1000000000\r\n\r\n"
UNREAD_BODIES = {  # requests the app answers without reading the body, which then trickles on
    "POST /healthz": b"POST /healthz HTTP/1.1\r\n" + _HUGE,
    "GET with a body": b"GET /healthz HTTP/1.1\r\n" + _HUGE,
    "chunked GET": b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n",
    "unknown path": b"POST /nowhere HTTP/1.1\r\n" + _HUGE,
    "DELETE /mcp after a 413": b"DELETE /mcp HTTP/1.1\r\n" + _HUGE,
    "PUT /mcp": b"PUT /mcp HTTP/1.1\r\n" + _HUGE,
}


def test_an_answered_request_whose_body_trickles_on_is_cut() -> None:
    """The body deadline holds for every request, also one answered without reading its body.

    Before, each trickled byte cancelled uvicorn's keep-alive timer and the head timer was off once
    the head was in: 200 of 200 such connections were still open after 240 s.
    """
    port = free_port()
    args = [APP, str(port), "--head-timeout", "1", "--body-timeout", "1"]
    per_kind = 8
    with python_server(args, port):
        socks = {
            (kind, i): socket.create_connection(("127.0.0.1", port), timeout=5)
            for kind in UNREAD_BODIES
            for i in range(per_kind)
        }
        started = time.monotonic()
        open_ = set(socks)
        try:
            for (kind, _), sock in socks.items():
                sock.sendall(UNREAD_BODIES[kind])
            while open_ and time.monotonic() - started < 8:
                time.sleep(0.3)
                for key in list(open_):
                    sock = socks[key]
                    drip = b"1\r\nx\r\n" if key[0] == "chunked GET" else b"x"
                    try:
                        if _closed(sock):
                            open_.discard(key)
                        else:
                            sock.sendall(drip)
                    except OSError:
                        open_.discard(key)
            assert httpx2.get(f"http://127.0.0.1:{port}/healthz").text == "ok"
        finally:
            for sock in socks.values():
                sock.close()
    assert not open_, f"still open after 8 s: {sorted({kind for kind, _ in open_})}"
