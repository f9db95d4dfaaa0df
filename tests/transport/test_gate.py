"""The per-caller concurrency gate is keyed on who the caller provably is, in every response mode.

The attacks of issue 12: one token holder sends five concurrent slow calls, each with its own
session (stateful) or a made-up `Mcp-Session-Id` (stateless), or with a second `Authorization`
header after the real one. The limit is 2: two calls run, three get 429, whatever the headers.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import httpx2
import pytest

from tests.helpers import free_port, python_server
from tests.transport.http_support import (
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
