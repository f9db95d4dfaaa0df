"""Serving over a socket: bearer auth (static, JWT), probes, limits, draining, stateless replicas."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import free_port, python_server, text_of

APP = "tests/servers/http_app.py"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef-xyz"
ISSUER = "https://idp.example.com"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def call(i: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def connect_with(url: str, token: str | None) -> tuple[httpx2.AsyncClient, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=20)
    return http, streamable_http_client(url, http_client=http)


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"# principal token scopes\nalice {ALICE} tools\nbob {BOB}\n")
    return path


@pytest.mark.anyio
async def test_static_tokens_name_the_principal_and_scopes_are_enforced(tokens_file: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), "--tokens", str(tokens_file), "--scopes", "tools"], port) as running:
        http, transport = await connect_with(url, ALICE)
        async with http, Client(transport, mode="legacy") as client:
            who = await client.call_tool("whoami", {})
        assert text_of(who) == "alice"
        missing = httpx2.post(url, headers=ACCEPT, json=INIT)
        wrong = httpx2.post(url, headers={**ACCEPT, "Authorization": "Bearer nope-nope-nope-nope"}, json=INIT)
        no_scope = httpx2.post(url, headers={**ACCEPT, "Authorization": f"Bearer {BOB}"}, json=INIT)
        metadata = httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp")
        log = running.log()
    assert missing.status_code == 401
    challenge = missing.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (
        f'resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"' in challenge
    )
    assert wrong.status_code == 401
    assert no_scope.status_code == 403
    assert 'error="insufficient_scope"' in no_scope.headers["www-authenticate"]
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == url
    for token in (ALICE, BOB, "nope-nope-nope-nope"):
        assert token not in log


def rsa_jwks(tmp_path: Path) -> tuple[Any, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", use="sig", alg="RS256")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    return key, path


def mint(key: Any, **claims: Any) -> str:
    base = {"iss": ISSUER, "sub": "user-42", "exp": int(time.time()) + 300, "scope": "tools read"}
    base.update(claims)
    return jwt.encode(
        {k: v for k, v in base.items() if v is not None}, key, algorithm="RS256", headers={"kid": "k1"}
    )


@pytest.mark.anyio
async def test_jwt_audience_issuer_expiry_and_signature(tmp_path: Path) -> None:
    key, jwks = rsa_jwks(tmp_path)
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    bad = {
        "other audience": mint(key, aud="https://another-service.example.com/mcp"),
        "expired": mint(key, aud=url, exp=int(time.time()) - 600),
        "wrong issuer": mint(key, aud=url, iss="https://evil.example.com"),
        "forged": mint(other_key, aud=url),
        "no audience": mint(key, aud=None),
        "alg none": jwt.encode(
            {"iss": ISSUER, "sub": "x", "aud": url, "exp": int(time.time()) + 60}, None, algorithm="none"
        ),
    }
    with python_server(
        [APP, str(port), "--jwks", str(jwks), "--issuer", ISSUER, "--scopes", "tools"], port
    ) as running:
        http, transport = await connect_with(url, mint(key, aud=url))
        async with http, Client(transport, mode="legacy") as client:
            who = await client.call_tool("whoami", {})
        statuses = {
            name: httpx2.post(
                url, headers={**ACCEPT, "Authorization": f"Bearer {tok}"}, json=INIT
            ).status_code
            for name, tok in bad.items()
        }
        no_scope = httpx2.post(
            url, headers={**ACCEPT, "Authorization": f"Bearer {mint(key, aud=url, scope='x')}"}, json=INIT
        )
        log = running.log()
    assert text_of(who) == "user-42"
    assert statuses == dict.fromkeys(bad, 401)
    assert no_scope.status_code == 403
    for token in bad.values():
        assert token not in log


def test_probes_body_limit_and_per_client_concurrency(tokens_file: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [
        APP,
        str(port),
        "--stateless",
        "--json",
        "--max-body",
        "4096",
        "--max-concurrent",
        "2",
        "--tokens",
        str(tokens_file),
    ]
    auth = {**ACCEPT, "Authorization": f"Bearer {ALICE}"}
    with python_server(args, port):
        assert httpx2.get(f"http://127.0.0.1:{port}/healthz").text == "ok"
        assert httpx2.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        big = call(1, "echo", {"text": "x" * 10_000})
        assert httpx2.post(url, headers=auth, json=big).status_code == 413
        statuses: list[int] = []

        def slow(i: int) -> None:
            statuses.append(
                httpx2.post(
                    url, headers=auth, json=call(i, "sleep", {"seconds": 1.0}), timeout=20
                ).status_code
            )

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(statuses) == [200, 200, 429, 429, 429]


def test_stateless_replicas_answer_any_request() -> None:
    ports = [free_port(), free_port()]
    with (
        python_server([APP, str(ports[0]), "--stateless", "--json"], ports[0]),
        python_server([APP, str(ports[1]), "--stateless", "--json"], ports[1]),
    ):
        urls = [f"http://127.0.0.1:{p}/mcp" for p in ports]
        init = httpx2.post(urls[0], headers=ACCEPT, json=INIT)
        assert "mcp-session-id" not in init.headers
        answers = [
            httpx2.post(
                urls[i % 2],
                headers={**ACCEPT, "mcp-protocol-version": "2025-11-25"},
                json=call(i, "echo", {"text": f"r{i}"}),
            ).json()
            for i in range(4)
        ]
    assert [a["result"]["content"][0]["text"] for a in answers] == ["r0", "r1", "r2", "r3"]


def test_sigterm_drains_in_flight_calls_and_refuses_new_ones() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server([APP, str(port), "--stateless", "--json"], port) as running:
        result: dict[str, Any] = {}

        def long_call() -> None:
            reply = httpx2.post(url, headers=ACCEPT, json=call(1, "sleep", {"seconds": 2.0}), timeout=20)
            result["status"], result["body"] = reply.status_code, reply.json()

        worker = threading.Thread(target=long_call)
        worker.start()
        time.sleep(0.5)
        running.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        try:
            late = httpx2.post(
                url, headers=ACCEPT, json=call(2, "echo", {"text": "late"}), timeout=5
            ).status_code
        except httpx2.TransportError:
            late = 0  # the listener is already closed: also a refusal
        worker.join()
        exit_code = running.proc.wait(timeout=15)
    assert result["status"] == 200
    assert result["body"]["result"]["content"][0]["text"] == "slept 2.0"
    assert late in (0, 503)
    assert exit_code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has drained


@pytest.mark.anyio
async def test_keys_use_the_whole_subject_and_the_groups(tmp_path: Path) -> None:
    """Red team 10b B2: subjects sharing their first 128+ characters (Kubernetes service accounts)
    were one caller to the result cache and the rate limits; one subject's tokens with different
    groups shared a cached answer."""
    key, jwks = rsa_jwks(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    prefix = "system:serviceaccount:" + "reporting-" * 12 + ":agent-"
    assert len(prefix) > 128

    async def ask(token: str, tool: str) -> tuple[str, bool]:
        http, transport = await connect_with(url, token)
        async with http, Client(transport, mode="legacy") as client:
            result = await client.call_tool(tool, {})
        return text_of(result), result.is_error

    with python_server([APP, str(port), "--jwks", str(jwks), "--issuer", ISSUER, "--limit", "1"], port):
        a, b = mint(key, aud=url, sub=prefix + "a"), mint(key, aud=url, sub=prefix + "b")
        emea = mint(key, aud=url, sub="report-bot", groups=["emea-team"])
        amer = mint(key, aud=url, sub="report-bot", groups=["amer-team"])
        emea_again = mint(key, aud=url, sub="report-bot", groups=["emea-team"])
        assert await ask(a, "whoami") == (prefix + "a", False)  # the whole subject
        drafts = {name: await ask(tok, "draft") for name, tok in [("a", a), ("b", b), ("emea", emea)]}
        drafts["amer"] = await ask(amer, "draft")
        drafts["emea again"] = await ask(emea_again, "draft")
        limited = [(await ask(a, "echo"))[1], (await ask(a, "echo"))[1], (await ask(b, "echo"))[1]]
    assert drafts["a"] != drafts["b"]
    assert drafts["emea"] != drafts["amer"]
    assert drafts["emea again"] == drafts["emea"]  # the same caller still hits its cache
    assert limited == [False, True, False]  # b's bucket is its own
