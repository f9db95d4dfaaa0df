"""The test seam: a transport that answers egress from in-process handlers, one per host.

In the spirit of httpx's `MockTransport`, it replaces only the bottom layer (sockets, DNS, TLS).
Everything above still runs on every request: the URL canonicalisation and policy (schemes,
userinfo, ports, the allowlist and private networks), the redirect loop that admits every hop
again, the OAuth2 token source that attaches its bearer only to its API host, the body cap and the
status mapping of `fetch_json`. A test through it proves the handler and the policy together.

    async def orders(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"id": request.url.path.rsplit("/", 1)[-1]})

    egress = MockEgress({"orders.acme.internal": orders}, resolve={"orders.acme.internal": "10.1.2.3"})
    async with connect(server, egress=egress) as client: ...

A host in `resolve` has its answers judged by the policy's address judge as real DNS answers
would be (so a test also proves `private_networks`); a host without one is not judged (it has no
address: nothing is dialled). IP-literal URLs are always judged.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from ipaddress import ip_address
from typing import TYPE_CHECKING

import httpx2

from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.policy import EgressPolicy, admit, judge
from mcpkit.egress.urls import canonical_host, canonicalise

if TYPE_CHECKING:
    from mcpkit.egress.client import GuardedClient

__all__ = ["EgressHandler", "MockEgress"]

EgressHandler = Callable[[httpx2.Request], "httpx2.Response | Awaitable[httpx2.Response]"]
"""`handler(request) -> response`, sync or async, as for httpx's `MockTransport`."""


class MockEgress(httpx2.AsyncBaseTransport):
    """Answer egress requests from handlers keyed by host (`"api.example.com"` or `"host:port"`).

    Args:
        routes: Host (or `host:port`) -> handler. A request to a host with no route fails as an
            unreachable host would (the tool sees a retryable upstream error) and is recorded in
            `unrouted`.
        resolve: Host -> the address(es) it "resolves" to, judged by the policy like DNS answers.

    Attributes:
        requests: Every request that reached a handler, in order (headers as sent, bearer included).
        unrouted: Hosts that were asked for but have no route.
    """

    def __init__(
        self,
        routes: Mapping[str, EgressHandler],
        *,
        resolve: Mapping[str, str | Sequence[str]] | None = None,
    ) -> None:
        self.routes = {self._key(k): v for k, v in routes.items()}
        self.resolve = {
            canonical_host(h)[0]: [ip_address(a) for a in ([v] if isinstance(v, str) else v)]
            for h, v in (resolve or {}).items()
        }
        self.requests: list[httpx2.Request] = []
        self.unrouted: list[str] = []
        self.policy = EgressPolicy()

    @staticmethod
    def _key(host: str) -> str:
        name, sep, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        return f"{canonical_host(name)[0]}{sep}{port}"

    @contextmanager
    def installed(self, client: GuardedClient) -> Iterator[MockEgress]:
        """Route `client`'s egress here (under its own policy) for the duration of the block."""
        previous = client.transport
        self.policy = client.policy
        client.transport = self  # type: ignore[assignment]
        try:
            yield self
        finally:
            client.transport = previous

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Admit the URL, judge the host's mock answers, then ask its handler."""
        target = canonicalise(str(request.url))
        admit(target, self.policy)
        for address in self.resolve.get(target.host, ()):
            judge(address, self.policy, target.host, literal=False)
        handler = self.routes.get(f"{target.host}:{target.port}") or self.routes.get(target.host)
        if handler is None:
            self.unrouted.append(target.host)
            raise httpx2.ConnectError(f"MockEgress has no route for {target.host}")
        await request.aread()
        self.requests.append(request)
        response = handler(request)
        if inspect.isawaitable(response):
            response = await response
        if not isinstance(response, httpx2.Response):
            raise EgressDenied("malformed", "The mock handler did not return an httpx2.Response.")
        # as from the network: an unread stream, which the client reads under its byte cap
        body = await response.aread()  # decoded: the encoding headers no longer describe it
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-encoding"]
        return httpx2.Response(response.status_code, headers=headers, stream=_Body(body))


class _Body(httpx2.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._data
