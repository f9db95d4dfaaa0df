"""The transport dials the address it checked, once, and keeps the name for Host, SNI and verification.

Servers: the "allowed" one listens on 127.0.0.1 (admitted by the testing judge); the
"forbidden" one on 127.0.0.2, which the judge refuses like any loopback address. Every test
proves the forbidden server saw no connection at all.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from ipaddress import ip_address

import httpcore2
import pytest

from mcpkit.egress import (
    Denial,
    EgressDenied,
    EgressPolicy,
    GuardedClient,
    GuardedTransport,
    StaticResolver,
    SystemResolver,
    UpstreamError,
    judge_address,
)
from mcpkit.egress.addresses import IPAddress
from mcpkit.egress.transport import CheckedBackend
from mcpkit.errors import DefinitionError
from tests.egress.egress_support import TestCA, TestServer, loopback_policy, ok

pytestmark = pytest.mark.anyio


class RebindingResolver:
    """Answers `first` on the first lookup and `later` on every other: a DNS rebinding attacker."""

    def __init__(self, first: Sequence[str], later: Sequence[str]) -> None:
        self.first = [ip_address(a) for a in first]
        self.later = [ip_address(a) for a in later]
        self.calls = 0

    async def resolve(self, host: str, port: int) -> Sequence[IPAddress]:
        self.calls += 1
        return self.first if self.calls == 1 else self.later


async def test_rebinding_resolver_cannot_redirect_the_connection() -> None:
    async with (
        TestServer(ok(b"checked")) as good,
        TestServer(ok(b"rebound"), "127.0.0.2", port=good.port) as bad,
    ):
        resolver = RebindingResolver(["127.0.0.1"], ["127.0.0.2"])
        port = good.port
        policy = loopback_policy(f"rebind.test:{port}")
        async with GuardedClient(policy, resolver=resolver) as client:
            response = await client.fetch(f"http://rebind.test:{port}/")
        assert response.content == b"checked"
        assert resolver.calls == 1  # resolved once: no second lookup between check and connect
        assert good.seen[-1].local == ("127.0.0.1", port)
        assert bad.connections == 0


async def test_rebinding_on_a_new_connection_is_checked_again() -> None:
    async with TestServer(ok(b"checked")) as good:
        resolver = RebindingResolver(["127.0.0.1"], ["127.0.0.2"])
        async with GuardedClient(loopback_policy(f"rebind.test:{good.port}"), resolver=resolver) as client:
            assert (await client.fetch(f"http://rebind.test:{good.port}/")).content == b"checked"
            # the server closes each connection, so the next fetch dials anew and resolves anew
            with pytest.raises(EgressDenied) as caught:
                await client.fetch(f"http://rebind.test:{good.port}/")
        assert caught.value.reason == "loopback"
        assert "127.0.0.2" not in caught.value.message
        assert resolver.calls == 2
        assert len(good.seen) == 1


async def test_mixed_answers_refuse_the_host_even_when_the_good_one_comes_first() -> None:
    async with TestServer(ok()) as good, TestServer(ok(), "127.0.0.2", port=good.port) as bad:
        resolver = StaticResolver({"mixed.test": ["127.0.0.1", "127.0.0.2"]})
        async with GuardedClient(loopback_policy(f"mixed.test:{good.port}"), resolver=resolver) as client:
            with pytest.raises(EgressDenied):
                await client.fetch(f"http://mixed.test:{good.port}/")
        assert good.connections == 0
        assert bad.connections == 0


async def test_backend_dials_checked_addresses_in_order_and_falls_back() -> None:
    async with TestServer(ok()) as good:
        # a judge admitting two loopback addresses; nothing listens on 127.0.0.3
        admitted = {ip_address("127.0.0.1"), ip_address("127.0.0.3")}

        def judge(ip: IPAddress) -> Denial | None:
            return None if ip in admitted else judge_address(ip)

        resolver = StaticResolver({"api.test": ["127.0.0.3", "127.0.0.1"]})
        backend = CheckedBackend(EgressPolicy(address_judge=judge), resolver)
        stream = await backend.connect_tcp("api.test", good.port, timeout=5)
        assert stream.get_extra_info("server_addr")[:2] == ("127.0.0.1", good.port)
        await stream.aclose()
        assert resolver.calls == ["api.test"]
        with pytest.raises(EgressDenied):
            await backend.connect_tcp("127.0.0.2", good.port, timeout=5)
        with pytest.raises(EgressDenied):
            await backend.connect_unix_socket("/tmp/x.sock")
        assert resolver.calls == ["api.test"]  # IP literals are never handed to the resolver


async def test_tls_uses_the_name_for_sni_host_and_verification(test_ca: TestCA) -> None:
    async with TestServer(ok(b"secure"), ssl_context=test_ca.server_context()) as server:
        resolver = StaticResolver({"api.test": ["127.0.0.1"], "wrong.test": ["127.0.0.1"]})
        policy = loopback_policy(f"api.test:{server.port}", f"wrong.test:{server.port}")
        async with GuardedClient(policy, resolver=resolver, ssl_context=test_ca.client_context()) as client:
            response = await client.fetch(f"https://api.test:{server.port}/tls")
            assert response.content == b"secure"
            seen = server.seen[-1]
            assert seen.sni == "api.test"
            assert seen.headers["host"] == f"api.test:{server.port}"
            assert seen.local == ("127.0.0.1", server.port)
            # same address, a name the certificate does not cover: verification must fail
            with pytest.raises(UpstreamError) as caught:
                await client.fetch(f"https://wrong.test:{server.port}/tls")
            assert "certificate" in caught.value.message
            assert not caught.value.retryable
        assert len(server.seen) == 1


async def test_system_trust_store_rejects_the_test_ca(test_ca: TestCA) -> None:
    async with TestServer(ok(), ssl_context=test_ca.server_context()) as server:
        resolver = StaticResolver({"api.test": ["127.0.0.1"]})
        async with GuardedClient(loopback_policy(f"api.test:{server.port}"), resolver=resolver) as client:
            with pytest.raises(UpstreamError):
                await client.fetch(f"https://api.test:{server.port}/")
        assert server.seen == []


def test_non_verifying_ssl_context_is_refused() -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with pytest.raises(DefinitionError):
        GuardedTransport(loopback_policy(), StaticResolver({}), ssl_context=ctx)
    with pytest.raises(DefinitionError):
        GuardedClient(loopback_policy(), ssl_context=ctx)


async def test_transport_rechecks_urls_it_is_handed() -> None:
    import httpx2

    transport = GuardedTransport(loopback_policy("api.test"), StaticResolver({"api.test": ["127.0.0.1"]}))
    for url in ["http://other.test/", "http://api.test:8080/", "http://127.0.0.2/", "http://user@api.test/"]:
        with pytest.raises(EgressDenied):
            await transport.handle_async_request(httpx2.Request("GET", url))
    await transport.aclose()


async def test_sni_extension_from_a_caller_is_ignored(test_ca: TestCA) -> None:
    import httpx2

    async with TestServer(ok(), ssl_context=test_ca.server_context()) as server:
        transport = GuardedTransport(
            loopback_policy(f"api.test:{server.port}"),
            StaticResolver({"api.test": ["127.0.0.1"]}),
            ssl_context=test_ca.client_context(),
        )
        request = httpx2.Request(
            "GET", f"https://api.test:{server.port}/", extensions={"sni_hostname": "x.test"}
        )
        response = await transport.handle_async_request(request)
        await response.aread()
        await transport.aclose()
        assert server.seen[-1].sni == "api.test"


def test_backend_is_an_httpcore_backend() -> None:
    assert isinstance(CheckedBackend(loopback_policy(), StaticResolver({})), httpcore2.AsyncNetworkBackend)


async def test_production_defaults_refuse_a_real_local_server() -> None:
    """No test hooks at all: the system resolver and the production judge, against a live server."""
    async with TestServer(ok()) as server:
        policy = EgressPolicy(ports=frozenset({server.port}))
        async with GuardedClient(policy) as client:
            for url in (f"http://localhost:{server.port}/", f"http://127.0.0.1:{server.port}/"):
                with pytest.raises(EgressDenied) as caught:
                    await client.fetch(url)
                assert caught.value.reason == "loopback"
    assert server.connections == 0


async def test_system_resolver_answers_localhost() -> None:
    addresses = await SystemResolver().resolve("localhost", 80)
    assert addresses
    assert all(judge_address(a) is not None for a in addresses)
