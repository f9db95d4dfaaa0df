"""An `httpx2` transport that dials only addresses it has just resolved and checked.

Where the check happens: in a network backend under httpcore's connection pool. httpcore asks
the backend to `connect_tcp(host, port)` with the URL's host name; our backend resolves that name
once, judges every answer (any refused answer refuses the host), and dials the checked addresses
themselves, never the name. TLS is started afterwards by httpcore on that socket with
`server_hostname` = the URL's host, so SNI and certificate verification use the name, and the
request's Host header is untouched. Pooled connections are keyed by (scheme, host, port), so a
connection verified for one name is never reused for another.

Why not rewrite the URL host to the IP and set `extensions["sni_hostname"]`: the pool would then
key connections by IP, and a TLS connection verified for `a.example` could carry a request for
`b.example` that resolves to the same address. The backend keeps the name as the pool key.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

import httpcore2
import httpx2

from mcpkit.egress.check import resolve_checked
from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.policy import EgressPolicy, admit
from mcpkit.egress.resolver import Resolver
from mcpkit.egress.urls import canonicalise
from mcpkit.errors import DefinitionError

__all__ = ["CheckedBackend", "GuardedTransport", "verifying_ssl_context"]

_ERRORS: tuple[tuple[type[Exception], type[httpx2.TransportError]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.NetworkError, httpx2.NetworkError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.ProtocolError, httpx2.ProtocolError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except EgressDenied:
        raise
    except Exception as exc:
        for core, ours in _ERRORS:
            if isinstance(exc, core):
                raise ours(str(exc)) from exc
        raise


@functools.cache
def _system_context() -> ssl.SSLContext:
    # loading the trust store takes ~0.1 s; one context serves every client (httpcore only sets ALPN)
    return httpx2.create_ssl_context(verify=True, trust_env=False)


def verifying_ssl_context(ssl_context: ssl.SSLContext | None) -> ssl.SSLContext:
    """`ssl_context`, or the system trust store; refuses a context that skips verification."""
    ctx = ssl_context or _system_context()
    if ctx.verify_mode != ssl.CERT_REQUIRED or not ctx.check_hostname:
        raise DefinitionError("the egress SSL context must verify certificates and host names")
    return ctx


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """Resolves the host once, judges every answer, and dials only the checked addresses.

    Args:
        policy: Supplies the address judge.
        resolver: Asked once per new connection.
        inner: The backend that dials an IP (anyio's by default).
    """

    def __init__(
        self, policy: EgressPolicy, resolver: Resolver, inner: httpcore2.AsyncNetworkBackend | None = None
    ) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Connect to the first checked address of `host` that answers."""
        addresses = await resolve_checked(host, port, self._policy, self._resolver)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address).split("%")[0],
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve_checked never returns an empty list
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Never: egress goes over TCP to checked addresses only."""
        raise EgressDenied("scheme", "Unix sockets are not an egress path.")

    async def sleep(self, seconds: float) -> None:
        """Delegate to the inner backend."""
        await self._inner.sleep(seconds)


class _ResponseStream(httpx2.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """The egress transport: re-checks each request's URL, then sends it over `CheckedBackend`.

    No proxy, no Unix socket, no environment: nothing but the policy decides where bytes go.

    Args:
        policy: The egress policy.
        resolver: The resolver the backend asks once per connection.
        ssl_context: Trust roots for TLS; must verify (the system store by default).
        max_connections: Pool size.
    """

    def __init__(
        self,
        policy: EgressPolicy,
        resolver: Resolver,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 20,
    ) -> None:
        self._policy = policy
        self.backend = CheckedBackend(policy, resolver)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=verifying_ssl_context(ssl_context),
            max_connections=max_connections,
            http1=True,
            http2=False,
            retries=0,
            network_backend=self.backend,
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Check the URL again (defence in depth), then send it; the backend checks the address."""
        target = canonicalise(str(request.url))
        admit(target, self._policy)
        if (request.url.raw_host.decode("ascii"), request.url.port or target.port) != (
            target.host,
            target.port,
        ):
            raise EgressDenied("malformed", "The request URL is ambiguous.")
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        timeout = request.extensions.get("timeout")
        core_request = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions={} if timeout is None else {"timeout": timeout},  # never sni_hostname
        )
        with _httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        assert isinstance(response.stream, AsyncIterable)
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._pool.aclose()
