"""The client layers: redirects, credential stripping, templates, caps, timeouts, environment."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib

import anyio
import pytest

from mcpkit.egress import (
    EgressDenied,
    GuardedClient,
    ResponseTooLarge,
    StaticResolver,
    UpstreamError,
)
from mcpkit.errors import InvalidParams, ToolTimeout
from tests.egress.egress_support import Reply, Seen, TestCA, TestServer, client_for, loopback_policy, ok

pytestmark = pytest.mark.anyio

CREDENTIALS = {
    "Authorization": "Bearer sekrit-1",
    "Cookie": "session=sekrit-2",
    "Proxy-Authorization": "Basic sekrit-3",
    "X-API-Key": "sekrit-4",
    "X-Auth-Token": "sekrit-5",
    "api-key": "sekrit-6",
    "Private-Token": "sekrit-7",
    "X-Acme-Signature": "sekrit-8",
    "X-Custom-Key": "sekrit-9",
}


def redirect(status: int, location: str) -> Reply:
    return Reply(status, [("Location", location)])


def resolver(**hosts: str) -> StaticResolver:
    return StaticResolver({name.replace("_", "-") + ".test": [ip] for name, ip in hosts.items()})


async def test_redirect_to_a_private_address_is_refused_and_never_reached() -> None:
    async with (
        TestServer(ok(b"internal"), "127.0.0.2") as internal,
        TestServer(lambda s: redirect(302, f"http://internal.test:{internal.port}/admin")) as api,
    ):
        res = resolver(api="127.0.0.1", internal="127.0.0.2")
        policy = loopback_policy(f"api.test:{api.port}", f"internal.test:{internal.port}")
        async with GuardedClient(policy, resolver=res) as client:
            with pytest.raises(EgressDenied) as caught:
                await client.fetch(f"http://api.test:{api.port}/start")
    assert caught.value.reason == "loopback"
    assert "127.0.0.2" not in caught.value.message
    assert len(api.seen) == 1
    assert internal.connections == 0


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.2:{port}/",
        "http://2130706434:{port}/",
        "http://[::ffff:127.0.0.2]:{port}/",
        "http://localhost:{port}/",
        "http://api.test@127.0.0.2:{port}/",
        "gopher://127.0.0.1:{port}/",
        "http://api.test:22/",
        "http:\\\\127.0.0.2:{port}\\",
    ],
)
async def test_redirect_targets_are_checked_like_first_hops(location: str) -> None:
    async with (
        TestServer(ok(), "127.0.0.2") as internal,
        TestServer(lambda s: redirect(307, location.format(port=internal.port))) as api,
    ):
        res = StaticResolver({"api.test": ["127.0.0.1"], "localhost": ["127.0.0.2"]})
        async with GuardedClient(loopback_policy(), resolver=res) as client:
            with pytest.raises(EgressDenied):
                await client.fetch(f"http://api.test:{api.port}/", method="POST", content=b"x")
    assert internal.connections == 0


async def test_same_origin_redirect_chain_is_followed() -> None:
    def handler(seen: Seen) -> Reply:
        n = int(seen.target.strip("/") or 0)
        return redirect(302, f"/{n + 1}") if n < 3 else Reply(200, [], b"done")

    async with TestServer(handler) as api, client_for(api) as c:
        response = await c.fetch(f"http://api.test:{api.port}/")
    assert response.content == b"done"
    assert [s.target for s in api.seen] == ["/", "/1", "/2", "/3"]


async def test_hop_limit() -> None:
    async with TestServer(lambda s: redirect(302, "/again")) as api:
        policy = loopback_policy(f"api.test:{api.port}", max_redirects=2)
        async with GuardedClient(policy, resolver=resolver(api="127.0.0.1")) as client:
            with pytest.raises(EgressDenied) as caught:
                await client.fetch(f"http://api.test:{api.port}/")
    assert caught.value.reason == "redirect_limit"
    assert len(api.seen) == 3  # the first request and two followed hops


async def test_https_to_http_redirect_refused(test_ca: TestCA) -> None:
    async with TestServer(ok(b"plain")) as plain:
        location = f"http://api.test:{plain.port}/"
        async with TestServer(
            lambda s: redirect(301, location), ssl_context=test_ca.server_context()
        ) as secure:
            policy = loopback_policy(f"api.test:{secure.port}", f"api.test:{plain.port}")
            res = resolver(api="127.0.0.1")
            async with GuardedClient(policy, resolver=res, ssl_context=test_ca.client_context()) as client:
                with pytest.raises(EgressDenied) as caught:
                    await client.fetch(f"https://api.test:{secure.port}/")
                assert (await client.fetch(location)).content == b"plain"  # http itself is fine
    assert caught.value.reason == "https_downgrade"
    assert len(plain.seen) == 1


async def test_credentials_dropped_on_host_change_kept_on_same_host() -> None:
    async with TestServer(ok(b"other")) as other:
        target = f"http://other.test:{other.port}/landing"

        def handler(seen: Seen) -> Reply:
            return redirect(307, "/second") if seen.target == "/first" else redirect(307, target)

        async with TestServer(handler) as api:
            policy = loopback_policy(f"api.test:{api.port}", f"other.test:{other.port}")
            res = resolver(api="127.0.0.1", other="127.0.0.1")
            async with GuardedClient(policy, resolver=res) as client:
                headers = {**CREDENTIALS, "Accept": "text/plain", "User-Agent": "custom/1"}
                response = await client.fetch(
                    f"http://api.test:{api.port}/first",
                    method="PUT",
                    headers=headers,
                    json={"secret": "body"},
                )
    assert response.content == b"other"
    # same origin: everything kept, body included
    second = api.seen[1]
    assert second.target == "/second"
    assert second.method == "PUT"
    for name, value in CREDENTIALS.items():
        assert second.headers[name.lower()] == value
    assert json.loads(second.body) == {"secret": "body"}
    # new host: only harmless headers survive, and the 307 body is gone
    landed = other.seen[-1]
    assert landed.method == "PUT"
    assert landed.body == b""
    assert landed.headers["accept"] == "text/plain"
    assert landed.headers["user-agent"] == "custom/1"
    raw = json.dumps(landed.headers) + landed.body.decode()
    assert "sekrit" not in raw
    assert "secret" not in raw
    assert "content-type" not in landed.headers


async def test_port_change_on_same_host_counts_as_new_origin() -> None:
    async with (
        TestServer(ok()) as second,
        TestServer(lambda s: redirect(302, f"http://api.test:{second.port}/")) as first,
    ):
        policy = loopback_policy(f"api.test:{first.port}", f"api.test:{second.port}")
        async with GuardedClient(policy, resolver=resolver(api="127.0.0.1")) as client:
            await client.fetch(f"http://api.test:{first.port}/", headers={"X-API-Key": "sekrit"})
    assert "x-api-key" not in second.headers


async def test_303_becomes_get_without_body() -> None:
    def handler(seen: Seen) -> Reply:
        return redirect(303, "/result") if seen.target == "/submit" else Reply(200, [], b"ok")

    async with TestServer(handler) as api, client_for(api) as c:
        await c.fetch(f"http://api.test:{api.port}/submit", method="POST", json={"a": 1})
    assert api.seen[1].method == "GET"
    assert api.seen[1].body == b""
    assert "content-type" not in api.seen[1].headers


@pytest.mark.parametrize(
    "value",
    [
        "../admin",
        "a/../../admin",
        "%2e%2e%2f",
        "..%2fadmin",
        "x?admin=1",
        "x#frag",
        "https://evil.test/",
        "//evil.test",
    ],
)
async def test_template_parameters_stay_in_their_segment(value: str) -> None:
    async with TestServer(ok()) as api, client_for(api) as c:
        await c.fetch(f"http://api.test:{api.port}/v1/users/{{user}}/repos", path_params={"user": value})
    target = api.seen[-1].target
    assert target.startswith("/v1/users/")
    assert target.endswith("/repos")
    segment = target[len("/v1/users/") : -len("/repos")]
    assert "/" not in segment
    assert "?" not in segment
    assert "#" not in segment
    assert segment not in (".", "..")


@pytest.mark.parametrize("value", ["..", ".", ""])
async def test_dot_segment_parameters_refused(value: str) -> None:
    async with GuardedClient(loopback_policy("api.test"), resolver=resolver(api="127.0.0.1")) as client:
        with pytest.raises(InvalidParams):
            await client.fetch("http://api.test/v1/users/{user}", path_params={"user": value})


@pytest.mark.parametrize(
    "template",
    ["https://evil.test/x", "//evil.test/x", "http://api.test/x", "../admin", "/v2/../../admin", "a\\b"],
)
async def test_relative_path_cannot_override_the_base(template: str) -> None:
    client = GuardedClient(loopback_policy("api.test", "evil.test"), base_url="http://api.test/v1/")
    with pytest.raises(EgressDenied) as caught:
        await client.fetch(template)
    assert caught.value.reason == "template"


async def test_base_url_appends_relative_paths() -> None:
    async with TestServer(ok()) as api:
        base = f"http://api.test:{api.port}/v1"
        res = resolver(api="127.0.0.1")
        async with GuardedClient(loopback_policy(f"api.test:{api.port}"), resolver=res, base_url=base) as c:
            await c.fetch("/users/{id}", path_params={"id": "a/b"}, params={"q": "x y"})
            await c.fetch("admin")
    assert [s.target for s in api.seen] == ["/v1/users/a%2Fb?q=x+y", "/v1/admin"]


async def test_response_size_cap_declared() -> None:
    async with TestServer(ok(b"x" * 2000)) as api:
        policy = loopback_policy(f"api.test:{api.port}", max_bytes=1000)
        async with GuardedClient(policy, resolver=resolver(api="127.0.0.1")) as client:
            with pytest.raises(ResponseTooLarge):
                await client.fetch(f"http://api.test:{api.port}/")


async def test_response_size_cap_streamed_stops_reading() -> None:
    sent = 0
    hung_up = asyncio.Event()

    async def endless(writer: asyncio.StreamWriter) -> None:  # 640 MiB unless the client hangs up
        nonlocal sent
        try:
            for _ in range(10_000):
                writer.write(b"y" * 65536)
                sent += 65536
                await writer.drain()
        except ConnectionError:
            hung_up.set()

    async with TestServer(lambda s: Reply(200, [], stream=endless)) as api:
        policy = loopback_policy(f"api.test:{api.port}", max_bytes=100_000)
        async with GuardedClient(policy, resolver=resolver(api="127.0.0.1")) as client:
            with pytest.raises(ResponseTooLarge):
                await client.fetch(f"http://api.test:{api.port}/")
        with anyio.fail_after(10):
            await hung_up.wait()
    assert sent < 64 * 2**20  # the client hung up long before the server ran out (kernel buffers aside)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_decompression_bomb_capped(encoding: str) -> None:
    plain = b"\0" * 50_000_000
    body = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
    assert len(body) < 100_000
    async with TestServer(ok(body, ("Content-Encoding", encoding))) as api:
        policy = loopback_policy(f"api.test:{api.port}", max_bytes=1_000_000)
        async with GuardedClient(policy, resolver=resolver(api="127.0.0.1")) as client:
            with pytest.raises(ResponseTooLarge):
                await client.fetch(f"http://api.test:{api.port}/")


async def test_compressed_body_within_cap_is_decoded() -> None:
    async with (
        TestServer(ok(gzip.compress(b'{"a": 1}'), ("Content-Encoding", "gzip"))) as api,
        client_for(api) as c,
    ):
        assert await c.fetch_json(f"http://api.test:{api.port}/") == {"a": 1}


async def test_timeout_covers_a_slow_body() -> None:
    async def trickle(writer: asyncio.StreamWriter) -> None:
        for _ in range(100):
            writer.write(b"z")
            await writer.drain()
            await asyncio.sleep(0.1)

    async with TestServer(lambda s: Reply(200, [], stream=trickle)) as api:
        policy = loopback_policy(f"api.test:{api.port}", timeout=0.5)
        async with GuardedClient(policy, resolver=resolver(api="127.0.0.1")) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(ToolTimeout) as caught:
                await client.fetch(f"http://api.test:{api.port}/")
            assert loop.time() - started < 3
    assert caught.value.retryable


async def test_environment_proxies_are_ignored(monkeypatch: pytest.MonkeyPatch, test_ca: TestCA) -> None:
    async with TestServer(ok(b"proxy")) as proxy, TestServer(ok(b"direct")) as api:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.directory / "ca.pem"))
        async with client_for(api) as c:
            assert (await c.fetch(f"http://api.test:{api.port}/")).content == b"direct"
    assert proxy.connections == 0


async def test_default_user_agent_and_explicit_override() -> None:
    async with TestServer(ok()) as api, client_for(api) as c:
        await c.fetch(f"http://api.test:{api.port}/")
        assert api.headers["user-agent"].startswith("mcpkit/")
        await c.fetch(f"http://api.test:{api.port}/", headers={"user-agent": "mine/2"})
        assert api.headers["user-agent"] == "mine/2"


@pytest.mark.parametrize("name", ["Host", "Content-Length", "Transfer-Encoding"])
async def test_framing_and_host_headers_refused(name: str) -> None:
    async with GuardedClient(loopback_policy("api.test"), resolver=resolver(api="127.0.0.1")) as client:
        with pytest.raises(EgressDenied):
            await client.fetch("http://api.test/", headers={name: "1"})


async def test_connection_refused_is_retryable() -> None:
    async with TestServer(ok()) as api:
        port = api.port
    async with GuardedClient(
        loopback_policy(f"api.test:{port}"), resolver=resolver(api="127.0.0.1")
    ) as client:
        with pytest.raises(UpstreamError) as caught:
            await client.fetch(f"http://api.test:{port}/")
    assert caught.value.retryable


@pytest.mark.parametrize(("name", "value"), [("X-A", "1\r\nX-Injected: 2"), ("X A", "1"), ("X-A", "a\nb")])
async def test_header_injection_refused(name: str, value: str) -> None:
    async with GuardedClient(loopback_policy("api.test"), resolver=resolver(api="127.0.0.1")) as client:
        with pytest.raises(EgressDenied) as caught:
            await client.fetch("http://api.test/", headers={name: value})
    assert caught.value.reason == "header"


async def test_braces_in_a_plain_url_are_not_a_template() -> None:
    async with TestServer(ok()) as api, client_for(api) as client:
        await client.fetch(f"http://api.test:{api.port}/search?q={{x}}")
    assert api.seen[-1].target == "/search?q={x}"
