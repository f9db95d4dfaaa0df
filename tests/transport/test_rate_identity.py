"""Tool rate limits count who the caller provably is, never the name it gives itself (issue 12, item 6).

Without auth the identity is the connection: a client that re-initializes under a new
`clientInfo.name` on the same connection stays in its bucket. With auth it is the principal:
two names under one token share a bucket, two tokens do not.
"""

from __future__ import annotations

from pathlib import Path

import httpx2

from tests.helpers import free_port, python_server
from tests.transport.http_support import ACCEPT, ALICE, APP, BOB, INIT, VERSION, answer_text, bearer, call


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
