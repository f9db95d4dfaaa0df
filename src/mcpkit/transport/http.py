"""Serve an mcpkit server over Streamable HTTP as an ASGI app, bound to 127.0.0.1 by default."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecuritySettings

from mcpkit.errors import DefinitionError

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
        sdk_options: Passed to the SDK's `streamable_http_app`.
    """
    return server.lowlevel.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        host=host,
        transport_security=security_settings(host, allowed_hosts, allowed_origins),
        **sdk_options,
    )


def run_http(server: Server, *, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
    """Serve `server` with uvicorn until stopped."""
    import uvicorn

    uvicorn.run(http_app(server, host=host, **options), host=host, port=port, log_level="warning")
