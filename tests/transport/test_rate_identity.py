"""Tool rate limits count who the caller provably is, never the name it gives itself (issue 12, item 6).

Without auth the identity is the connection: a client that re-initializes under a new
`clientInfo.name` on the same connection stays in its bucket. With auth it is the principal:
two names under one token share a bucket, two tokens do not.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from pathlib import Path

import httpx2

from tests.helpers import free_port, python_server
from tests.transport.http_support import (
    ACCEPT,
    ALICE,
    APP,
    BOB,
    INIT,
    VERSION,
    answer_text,
    bearer,
    call,
    raw_request,
)


def _echo_as(client: httpx2.Client, url: str, headers: dict[str, str], name: str) -> str:
    """Open a session introducing itself as `name` (on `client`'s connection), then call echo once."""
    hello = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": name, "version": "1"}}}
    reply = client.post(url, headers=headers, json=hello)
    sid = reply.headers["mcp-session-id"]
    session = {**headers, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    client.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return answer_text(client.post(url, headers=session, json=call(2, "echo", {"text": "hi"})))


def test_new_client_names_on_one_connection_share_one_bucket() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), "--limit", "2"], port), httpx2.Client(timeout=20) as client:
        answers = [_echo_as(client, url, ACCEPT, f"client-{i}") for i in range(4)]
    assert answers[:2] == ["hi", "hi"]
    assert all(a.startswith("RATE_LIMITED") for a in answers[2:]), answers


def test_one_principal_under_many_names_shares_a_bucket_and_two_principals_do_not(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), "--limit", "2", "--tokens", str(tokens)], port):
        # A new connection per call too: the principal, not the connection, is the bucket.
        alice = []
        for i in range(3):
            with httpx2.Client(timeout=20) as client:
                alice.append(_echo_as(client, url, bearer(ALICE), f"alice-{i}"))
        with httpx2.Client(timeout=20) as client:
            bob = [_echo_as(client, url, bearer(BOB), "bob")]
    assert alice[:2] == ["hi", "hi"] and alice[2].startswith("RATE_LIMITED"), alice
    assert bob == ["hi"]


def _from_port(source_port: int, port: int) -> socket.socket:
    """A connection to the server from a chosen source port, as any local process may open one."""
    deadline = time.monotonic() + 10
    while True:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", source_port))
            sock.connect(("127.0.0.1", port))
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
            continue
        sock.settimeout(20)
        return sock


def _draft_from(source_port: int, port: int, name: str) -> tuple[str, bool]:
    """Open a session and call the cached `draft` tool over one connection from `source_port`."""
    with _from_port(source_port, port) as sock:
        hello = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": name, "version": "1"}}}
        status, fields, _ = raw_request(sock, hello, ACCEPT)
        assert status == 200
        session = {**ACCEPT, "Mcp-Session-Id": fields["mcp-session-id"], "Mcp-Protocol-Version": VERSION}
        raw_request(sock, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        status, _, body = raw_request(sock, call(5, "draft", {}), {**session, "Connection": "close"})
    result = json.loads(body)["result"]
    return result["content"][0]["text"], bool(result["_meta"]["mcpkit/cached"])


def test_a_later_connection_from_the_same_port_is_another_caller() -> None:
    """Before: the caller was `c:<host>:<port>`, so whoever bound the port next got the last
    caller's cached answer (and its rate buckets and sessions). A connection id is never reused."""
    port, source = free_port(), free_port()
    with python_server([APP, str(port), "--json"], port):
        first, first_cached = _draft_from(source, port, "victim")
        again, again_cached = _draft_from(source, port, "attacker")
    assert not first_cached and not again_cached
    assert again != first


def test_replicas_sharing_redis_never_share_an_unauthenticated_caller(redis_url: str) -> None:
    """Two replicas, one Redis cache: a caller of one is never a caller of the other, even from
    the same source port (the connection id holds each process's random instance id)."""
    name = f"mk-identity-{secrets.token_hex(4)}"
    one, two, source = free_port(), free_port(), free_port()
    common = ["--json", "--redis", redis_url, "--name", name]
    with python_server([APP, str(one), *common], one), python_server([APP, str(two), *common], two):
        first, _ = _draft_from(source, one, "victim")
        other, other_cached = _draft_from(source, two, "attacker")
    assert not other_cached and other != first
