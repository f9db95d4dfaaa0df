"""Serve an mcpkit server over Streamable HTTP as an ASGI app, bound to 127.0.0.1 by default."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from mcpkit.errors import DefinitionError
from mcpkit.transport.auth import HttpAuth, JWTVerifier
from mcpkit.transport.gate import ClientGate, ServingState

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from mcpkit.server import Server

__all__ = ["http_app", "run_http", "security_settings"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def security_settings(
    host: str, allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str] | None
) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: always on.

    On a loopback bind the loopback names are allowed; on any other bind the operator must say
    which Host values the server answers to (a wildcard bind with no list is refused).
    """
    hosts = list(allowed_hosts or ())
    if not hosts:
        if _is_loopback(host):
            hosts = [f"{name}:*" for name in _LOOPBACK_NAMES]
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
    max_concurrent_per_client: int = 16,
    **sdk_options: Any,
) -> Starlette:
    """The Streamable HTTP ASGI app of `server`.

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
        max_concurrent_per_client: Requests one client (session, else token, else connection) may
            have in flight; more get 429 with `Retry-After`.
        sdk_options: Passed to the SDK's `streamable_http_app`.
    """
    state = ServingState()
    routes = [Route("/healthz", _health), Route("/readyz", partial(_ready, state=state))]
    options: dict[str, Any] = {}
    if auth is not None:
        verifier = auth.verifier
        if isinstance(verifier, JWTVerifier) and verifier.audience.rstrip("/") != auth.resource_url.rstrip(
            "/"
        ):
            raise DefinitionError(
                "the JWT audience must be this server's resource URL (no token passthrough)"
            )
        options = {
            "auth": AuthSettings(
                issuer_url=AnyHttpUrl((list(auth.authorization_servers) or [auth.resource_url])[0]),
                resource_server_url=AnyHttpUrl(auth.resource_url),
                required_scopes=list(auth.required_scopes) or None,
                validate_token_resource=True,
            ),
            "token_verifier": verifier,
        }
    app = server.lowlevel.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        host=host,
        transport_security=security_settings(host, allowed_hosts, allowed_origins),
        max_request_body_size=max_body_bytes,
        custom_starlette_routes=routes,
        **options,
        **sdk_options,
    )
    app.state.mcpkit = state
    app.add_middleware(ClientGate, state=state, path=path, max_concurrent=max_concurrent_per_client)
    return app


def run_http(
    server: Server, *, host: str = "127.0.0.1", port: int = 8000, graceful_s: int = 30, **options: Any
) -> None:
    """Serve `server` with uvicorn until SIGINT/SIGTERM, then drain: finish running calls, refuse new ones."""
    import uvicorn

    app = http_app(server, host=host, **options)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=graceful_s, lifespan="on"
    )
    runner = uvicorn.Server(config)
    state: ServingState = app.state.mcpkit
    stop = runner.handle_exit

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        state.draining = True  # readiness fails and new MCP requests get 503 while calls finish
        stop(sig, frame)

    runner.handle_exit = handle_exit  # type: ignore[method-assign]
    try:
        runner.run()
    finally:
        anyio.run(server.aclose)


async def _health(request: Request) -> Response:
    return PlainTextResponse("ok")


async def _ready(request: Request, state: ServingState) -> Response:
    if state.draining:
        return PlainTextResponse("draining", status_code=503)
    return PlainTextResponse("ready")
