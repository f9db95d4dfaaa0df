"""Serve an mcpkit server over Streamable HTTP as an ASGI app, bound to 127.0.0.1 by default."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from mcpkit.errors import DefinitionError
from mcpkit.logs import install_redaction
from mcpkit.transport.auth import HttpAuth, JWTVerifier, StaticTokens
from mcpkit.transport.gate import ClientGate, SlotMiddleware
from mcpkit.transport.guard import BodyReader, RequestGuard, ServingState
from mcpkit.transport.runner import sse_drain, timed_h11
from mcpkit.transport.sessions import SessionManager

if TYPE_CHECKING:
    from mcpkit.server import Server

__all__ = ["UVICORN_LOGGERS", "http_app", "metrics_listener", "run_http", "security_settings"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def security_settings(
    host: str, allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str] | None
) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: always on.

    On a loopback bind the loopback names are allowed; on any other bind the operator must say
    which Host values the server answers to (a wildcard bind with no list is refused).
    """
    hosts = list(allowed_hosts or ())
    if not hosts:
        if _is_loopback(host):  # with or without a port: `Host: localhost` is what curl sends on :80
            hosts = [f"{name}:*" for name in _LOOPBACK_NAMES] + list(_LOOPBACK_NAMES)
        elif host in ("0.0.0.0", "::", ""):  # noqa: S104 - refusing, not binding
            raise DefinitionError(
                f"binding {host or '*'} needs allowed_hosts "
                "(the Host values clients use, e.g. mcp.example.com)"
            )
        else:
            hosts = [f"{host}:*", host]
    origins = (
        list(allowed_origins)
        if allowed_origins is not None
        else [f"http://{h}" if not h.startswith("http") else h for h in hosts]
        + [f"https://{h}" for h in hosts if not h.startswith("http")]
    )
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_app(
    server: Server,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    stateless: bool = False,
    json_response: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    auth: HttpAuth | None = None,
    max_body_bytes: int = 1_048_576,
    max_arriving_body_bytes: int | None = 64 * 1_048_576,
    body_timeout_s: float = 30.0,
    max_concurrent_per_client: int = 16,
    max_sessions: int | None = 1000,
    max_sessions_per_client: int | None = 16,
    session_idle_timeout_s: float | None = 1800.0,
    metrics: bool = False,
    forwarded_allow_ips: Sequence[str] | None = None,
    **sdk_options: Any,
) -> Starlette:
    """The Streamable HTTP ASGI app of `server`.

    Layers, outermost first: the request guard (repeated headers 400, draining 503), bearer
    authentication, `RequireAuth` (401/403), the per-caller gate (concurrency, session quota and
    one GET stream per session, keyed on the verified principal or the connection), the body
    reader (size and time, so no body is buffered before authentication), the SDK's transport.
    Serve it with `run_http` (or `mcpkit ... --transport http`): that adds the head timeout and the
    drain that lets SSE answers finish; under another ASGI server those are that server's business.

    Args:
        server: The server.
        path: Where the MCP endpoint lives.
        host: The address the app will be bound to (decides the default allowed Host values).
        stateless: No sessions: any replica can answer any request.
        json_response: Answer POSTs with plain JSON instead of an SSE stream (faster; no progress
            or log notifications during a call).
        allowed_hosts: Host header values to accept (`name:*` for any port).
        allowed_origins: Origin header values to accept.
        auth: Bearer-token auth; without it the endpoint is open (bind to loopback, the default).
        max_body_bytes: Larger request bodies get 413.
        max_arriving_body_bytes: Bytes of request bodies still arriving, all callers together; a
            body that would go past it gets 503 with `Retry-After` (None: no cap). Bodies are read
            after authentication, so this bounds what callers without a token cannot reach anyway.
        body_timeout_s: A request body must arrive within this many seconds (else 408).
        max_concurrent_per_client: Requests one caller (its verified principal, else its
            connection) may have in flight; more get 429 with `Retry-After`.
        max_sessions: Open sessions for the whole server (stateful mode); beyond, 503.
        max_sessions_per_client: Open sessions per caller; beyond, 429. None: no quota.
        session_idle_timeout_s: A session with no request for this long ends (its memory is freed).
        metrics: Serve the Prometheus text format at `GET /metrics` on this app, behind the same
            bearer auth and scopes as the MCP endpoint (open only when the endpoint is). For a
            scraper without a token, use `run_http(metrics_port=...)` instead: a listener of its
            own, on loopback unless told otherwise. Needs the `telemetry` extra and
            `mcpkit.telemetry.Telemetry` among the server's middleware.
        forwarded_allow_ips: The proxies (addresses or networks) whose `X-Forwarded-For` and
            `X-Forwarded-Proto` are believed; None (the default) believes nobody. Limits never
            key on the forwarded address either way, only on the principal or the connection.
        sdk_options: Passed to the SDK's `StreamableHTTPSessionManager` (`event_store`,
            `retry_interval`).
    """
    state = ServingState()
    lowlevel = server.lowlevel
    if not any(isinstance(m, SlotMiddleware) for m in lowlevel.middleware):
        lowlevel.middleware.append(SlotMiddleware())  # a call holds its caller's slot while it runs
    sessions = SessionManager(
        server.lowlevel,
        json_response=json_response,
        stateless=stateless,
        security_settings=security_settings(host, allowed_hosts, allowed_origins),
        max_request_body_size=max_body_bytes,
        session_idle_timeout=session_idle_timeout_s,
        max_sessions=max_sessions,
        max_per_client=max_sessions_per_client,
        **sdk_options,
    )
    endpoint: ASGIApp = ClientGate(
        BodyReader(
            StreamableHTTPASGIApp(sessions),
            max_body_bytes=max_body_bytes,
            body_timeout_s=body_timeout_s,
            max_arriving_bytes=max_arriving_body_bytes,
        ),
        max_concurrent=max_concurrent_per_client,
        sessions=None if stateless else sessions,
        resumable=sdk_options.get("event_store") is not None,
    )
    routes: list[Route] = []
    metrics_route: Route | None = None
    if metrics:
        from mcpkit.telemetry import configure, metrics_endpoint

        configure(server.name, prometheus=True)
        metrics_route = Route("/metrics", metrics_endpoint, methods=["GET"])
    middleware = [Middleware(RequestGuard, state=state, path=path)]
    if forwarded_allow_ips:
        middleware.append(Middleware(ProxyHeadersMiddleware, trusted_hosts=list(forwarded_allow_ips)))
    if auth is not None:
        verifier = auth.verifier
        if isinstance(verifier, JWTVerifier) and verifier.audience.rstrip("/") != auth.resource_url.rstrip(
            "/"
        ):
            raise DefinitionError(
                "the JWT audience must be this server's resource URL (no token passthrough)"
            )
        if isinstance(verifier, StaticTokens):
            verifier.register_secrets(server.redactor)  # a token pasted anywhere never reaches a log
        resource = AnyHttpUrl(auth.resource_url)
        issuer = AnyHttpUrl((list(auth.authorization_servers) or [auth.resource_url])[0])
        scopes = list(auth.required_scopes)
        middleware += [
            Middleware(
                AuthenticationMiddleware, backend=BearerAuthBackend(verifier, resource_server_url=resource)
            ),
            Middleware(AuthContextMiddleware),
        ]
        endpoint = RequireAuthMiddleware(endpoint, scopes, build_resource_metadata_url(resource))
        if metrics_route is not None:  # what the endpoint asks of a caller, /metrics asks too
            guarded = RequireAuthMiddleware(
                request_response(metrics_route.endpoint), scopes, build_resource_metadata_url(resource)
            )
            metrics_route = Route("/metrics", guarded, methods=["GET"])
        routes += create_protected_resource_routes(
            resource_url=resource, authorization_servers=[issuer], scopes_supported=scopes or None
        )
    routes = [Route(path, endpoint=endpoint), *routes]
    routes += [Route("/healthz", _health), Route("/readyz", partial(_ready, state=state))]
    if metrics_route is not None:
        routes.append(metrics_route)
    app = Starlette(routes=routes, middleware=middleware, lifespan=lambda _: sessions.run())
    app.state.mcpkit = state
    app.state.sessions = sessions
    return app


def run_http(
    server: Server,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    graceful_s: int = 30,
    idle_timeout_s: int = 5,
    head_timeout_s: float = 10.0,
    body_timeout_s: float = 30.0,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    **options: Any,
) -> None:
    """Serve `server` with uvicorn until SIGINT/SIGTERM, then drain: finish running calls, refuse new ones.

    Args:
        server: The server.
        host: The address to bind.
        port: The port.
        graceful_s: How long calls in flight may take to finish after SIGTERM.
        idle_timeout_s: A kept-alive connection with no request for this long is closed.
        head_timeout_s: A request's head (line and headers) must arrive within this long of the
            connection opening or the previous response ending (else 408 and close).
        body_timeout_s: A request's body must arrive within this long of its head, whatever the
            request (else 408 and close).
        metrics_port: Serve `GET /metrics` (Prometheus text) on a listener of its own at this port,
            without auth: for a scraper that has no token. Bound to `metrics_host`.
        metrics_host: The metrics listener's address: 127.0.0.1 unless the operator names another
            (a private interface the scraper reaches; never one the MCP clients reach).
        options: For `http_app` (`metrics=True` serves `/metrics` on the MCP port, behind its auth).
    """
    import uvicorn

    from mcpkit.threads import shorten_gil_waits

    shorten_gil_waits()
    app = http_app(server, host=host, body_timeout_s=body_timeout_s, **options)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=graceful_s,
        timeout_keep_alive=idle_timeout_s,
        http=timed_h11(head_timeout_s, body_timeout_s),
        lifespan="on",
        proxy_headers=False,  # uvicorn believes 127.0.0.1's X-Forwarded-For by default; http_app decides
    )
    # uvicorn's loggers got handlers of their own just now (the Config applies its log config) and
    # do not propagate: an ASGI traceback on uvicorn.error would otherwise bypass the redactor
    install_redaction(server.redactor, loggers=UVICORN_LOGGERS)
    runner = uvicorn.Server(config)
    state: ServingState = app.state.mcpkit
    stop = runner.handle_exit

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        state.start_draining()  # readiness fails and new MCP requests get 503 while calls finish
        stop(sig, frame)

    runner.handle_exit = handle_exit  # type: ignore[method-assign]
    try:
        with sse_drain(state), metrics_listener(server, metrics_host, metrics_port, idle_timeout_s):
            runner.run()
    finally:
        anyio.run(server.aclose)


@contextmanager
def metrics_listener(server: Server, host: str, port: int | None, idle_timeout_s: int = 5) -> Iterator[None]:
    """While the block runs, serve `GET /metrics` (and nothing else) on `host:port`, no auth.

    uvicorn in a thread of its own, with the MCP port's head, body and idle timeouts; the Prometheus
    registry it reads is the process's. `port` None: nothing is started.
    """
    if port is None:
        yield
        return
    import uvicorn

    from mcpkit.telemetry import configure, metrics_endpoint

    configure(server.name, prometheus=True)
    app = Starlette(routes=[Route("/metrics", metrics_endpoint, methods=["GET"])])
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_keep_alive=idle_timeout_s,
        http=timed_h11(10.0, 10.0),
        lifespan="off",
        proxy_headers=False,
    )
    listener = uvicorn.Server(config)
    thread = threading.Thread(target=listener.run, name="mcpkit-metrics", daemon=True)
    thread.start()
    while not listener.started and thread.is_alive():
        time.sleep(0.01)
    if not listener.started:
        raise DefinitionError(f"the metrics listener could not bind {host}:{port}")
    try:
        yield
    finally:
        listener.should_exit = True
        thread.join(timeout=5)


async def _health(request: Request) -> Response:
    return PlainTextResponse("ok")


async def _ready(request: Request, state: ServingState) -> Response:
    if state.draining:
        return PlainTextResponse("draining", status_code=503)
    return PlainTextResponse("ready")
