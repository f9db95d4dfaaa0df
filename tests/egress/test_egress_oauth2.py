"""OAuth2 client credentials against a local token endpoint and API (TLS on loopback)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import anyio
import pytest

from mcpkit.egress import (
    EgressDenied,
    GuardedClient,
    OAuth2ClientCredentials,
    StaticResolver,
    UpstreamStatusError,
)
from mcpkit.errors import DefinitionError, ToolError
from tests.egress.egress_support import Reply, Seen, TestCA, TestServer, loopback_policy, ok

pytestmark = pytest.mark.anyio

CLIENT_ID, CLIENT_SECRET = "client-7", "s3cr3t-value-that-must-not-leak"
SECRETS = {"ACME_CLIENT_ID": CLIENT_ID, "ACME_CLIENT_SECRET": CLIENT_SECRET}


@dataclass
class TokenEndpoint:
    """Issues `tok-1`, `tok-2`, ... after a short delay (so concurrent callers overlap)."""

    expires_in: int = 3600
    status: int = 200
    minted: int = 0
    delay: float = 0.2
    requests: list[Seen] = field(default_factory=list)

    async def __call__(self, seen: Seen) -> Reply:
        self.requests.append(seen)
        await asyncio.sleep(self.delay)
        if self.status != 200:
            return Reply(self.status, [("Content-Type", "application/json")], b'{"error": "invalid_client"}')
        self.minted += 1
        body = {"access_token": f"tok-{self.minted}", "token_type": "Bearer", "expires_in": self.expires_in}
        return Reply(200, [("Content-Type", "application/json")], json.dumps(body).encode())


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    token: TestServer
    api: TestServer
    other: TestServer
    endpoint: TokenEndpoint
    ca: TestCA

    def auth(self, **kwargs: object) -> OAuth2ClientCredentials:
        return OAuth2ClientCredentials(
            f"https://token.test:{self.token.port}/oauth/token",
            "ACME_CLIENT_ID",
            "ACME_CLIENT_SECRET",
            "read write",
            "api.test",
            **kwargs,  # type: ignore[arg-type]
        )

    def client(self, secrets: dict[str, str] = SECRETS, **kwargs: object) -> GuardedClient:
        policy = loopback_policy(
            f"token.test:{self.token.port}", f"api.test:{self.api.port}", f"other.test:{self.other.port}"
        )
        resolver = StaticResolver({h: ["127.0.0.1"] for h in ("token.test", "api.test", "other.test")})
        return GuardedClient(
            policy,
            resolver=resolver,
            auth=self.auth(**kwargs),
            secret=secrets.get,
            ssl_context=self.ca.client_context(),
        )

    def url(self, server: TestServer, path: str = "/data") -> str:
        host = "api.test" if server is self.api else "other.test" if server is self.other else "token.test"
        return f"https://{host}:{server.port}{path}"


def api_handler(seen: Seen) -> Reply:
    return Reply(200, [("Content-Type", "application/json")], b'{"ok": true}')


@pytest.fixture
async def rig(test_ca: TestCA) -> AsyncIterator[Rig]:
    endpoint = TokenEndpoint()
    async with (
        TestServer(endpoint, ssl_context=test_ca.server_context()) as token,
        TestServer(api_handler, ssl_context=test_ca.server_context()) as api,
        TestServer(ok(b"{}"), ssl_context=test_ca.server_context()) as other,
    ):
        yield Rig(token, api, other, endpoint, test_ca)


async def test_token_minted_once_for_concurrent_calls(rig: Rig) -> None:
    async with rig.client() as client:
        results: list[object] = []

        async def call() -> None:
            results.append(await client.fetch_json(rig.url(rig.api)))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(call)
    assert results == [{"ok": True}] * 20
    assert rig.endpoint.minted == 1
    assert len(rig.endpoint.requests) == 1
    assert {s.headers["authorization"] for s in rig.api.seen} == {"Bearer tok-1"}


async def test_token_request_shape_and_no_bearer_on_it(rig: Rig) -> None:
    async with rig.client() as client:
        await client.fetch(rig.url(rig.api))
    request = rig.endpoint.requests[0]
    assert request.method == "POST"
    assert request.target == "/oauth/token"
    assert (
        request.headers["authorization"]
        == "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
    )
    form = parse_qs(request.body.decode())
    assert form == {"grant_type": ["client_credentials"], "scope": ["read write"]}
    assert "bearer" not in json.dumps(request.headers).lower()


async def test_client_secret_post(rig: Rig) -> None:
    async with rig.client(client_auth="post") as client:
        await client.fetch(rig.url(rig.api))
    request = rig.endpoint.requests[0]
    assert "authorization" not in request.headers
    form = parse_qs(request.body.decode())
    assert form["client_id"] == [CLIENT_ID]
    assert form["client_secret"] == [CLIENT_SECRET]


async def test_refreshed_after_expiry(rig: Rig) -> None:
    clock = Clock()
    rig.endpoint.expires_in = 100
    async with rig.client() as client:
        assert client.auth is not None
        client.auth._clock = clock  # the bound source's clock; production uses time.monotonic
        await client.fetch(rig.url(rig.api))
        clock.now += 60  # within lifetime minus margin (100 - 30)
        await client.fetch(rig.url(rig.api))
        clock.now += 15  # past 70 s: refresh
        await client.fetch(rig.url(rig.api))
    assert rig.endpoint.minted == 2
    assert [s.headers["authorization"] for s in rig.api.seen] == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-2",
    ]


async def test_never_sent_to_another_host(rig: Rig) -> None:
    async with rig.client() as client:
        await client.fetch(rig.url(rig.other))
        await client.fetch(rig.url(rig.api))
    assert "authorization" not in rig.other.headers
    assert rig.api.headers["authorization"] == "Bearer tok-1"


async def test_not_sent_over_plain_http_to_the_api_host(rig: Rig) -> None:
    async with TestServer(api_handler) as plain:
        policy = loopback_policy(f"token.test:{rig.token.port}", f"api.test:{plain.port}")
        client = GuardedClient(
            policy,
            resolver=StaticResolver({"api.test": ["127.0.0.1"], "token.test": ["127.0.0.1"]}),
            auth=rig.auth(),
            secret=SECRETS.get,
            ssl_context=rig.ca.client_context(),
        )
        async with client:
            await client.fetch(f"http://api.test:{plain.port}/data")
    assert "authorization" not in plain.headers
    assert rig.endpoint.requests == []


async def test_redirect_from_api_to_other_host_drops_the_bearer(rig: Rig) -> None:
    rig.api.handler = lambda seen: Reply(307, [("Location", rig.url(rig.other, "/landing"))])
    async with rig.client() as client:
        await client.fetch(rig.url(rig.api))
    assert rig.api.headers["authorization"] == "Bearer tok-1"
    assert rig.other.seen[-1].target == "/landing"
    assert "authorization" not in rig.other.headers


async def test_401_mints_a_fresh_token_once(rig: Rig) -> None:
    rig.api.handler = lambda seen: Reply(
        401 if seen.headers["authorization"] == "Bearer tok-1" else 200, [], b"{}"
    )
    async with rig.client() as client:
        assert await client.fetch_json(rig.url(rig.api)) == {}
    assert rig.endpoint.minted == 2
    rig.api.handler = lambda seen: Reply(401, [], b"{}")
    async with rig.client() as client:
        with pytest.raises(UpstreamStatusError) as caught:
            await client.fetch_json(rig.url(rig.api))
    assert caught.value.status == 401
    assert rig.endpoint.minted == 4  # one fresh client: mint, 401, re-mint, 401, give up


async def test_token_endpoint_refusal(rig: Rig) -> None:
    rig.endpoint.status = 401
    async with rig.client() as client:
        with pytest.raises(UpstreamStatusError) as caught:
            await client.fetch(rig.url(rig.api))
    assert not caught.value.retryable
    assert "invalid_client" in caught.value.message
    assert CLIENT_SECRET not in caught.value.message
    assert CLIENT_ID not in caught.value.message
    assert rig.api.seen == []


async def test_missing_secret_names_it_and_calls_nobody(rig: Rig) -> None:
    async with rig.client(secrets={"ACME_CLIENT_ID": CLIENT_ID}) as client:
        with pytest.raises(ToolError) as caught:
            await client.fetch(rig.url(rig.api))
    assert "ACME_CLIENT_SECRET" in caught.value.message
    assert rig.endpoint.requests == []
    assert rig.api.seen == []


async def test_token_call_goes_through_the_guard(rig: Rig) -> None:
    policy = loopback_policy(f"api.test:{rig.api.port}", f"token.test:{rig.token.port}")
    resolver = StaticResolver(
        {"api.test": ["127.0.0.1"], "token.test": ["127.0.0.2"]}
    )  # token host is internal
    client = GuardedClient(
        policy, resolver=resolver, auth=rig.auth(), secret=SECRETS.get, ssl_context=rig.ca.client_context()
    )
    async with client:
        with pytest.raises(EgressDenied) as caught:
            await client.fetch(rig.url(rig.api))
    assert caught.value.reason == "loopback"
    not_listed = GuardedClient(
        loopback_policy(f"api.test:{rig.api.port}"),
        resolver=StaticResolver({"api.test": ["127.0.0.1"], "token.test": ["127.0.0.1"]}),
        auth=rig.auth(),
        secret=SECRETS.get,
        ssl_context=rig.ca.client_context(),
    )
    async with not_listed:
        with pytest.raises(EgressDenied) as caught:
            await not_listed.fetch(rig.url(rig.api))
    assert caught.value.reason == "not_allowlisted"
    assert rig.endpoint.requests == []
    assert rig.api.seen == []


def test_definition_errors() -> None:
    with pytest.raises(DefinitionError):
        OAuth2ClientCredentials("http://token.test/", "A", "B", api_host="api.test")
    with pytest.raises(DefinitionError):
        OAuth2ClientCredentials("https://token.test/", "A", "B")
    with pytest.raises(DefinitionError):
        OAuth2ClientCredentials("https://user@token.test/", "A", "B", api_host="api.test")
    with pytest.raises(DefinitionError):
        GuardedClient(auth=OAuth2ClientCredentials("https://token.test/", "A", "B", api_host="api.test"))
