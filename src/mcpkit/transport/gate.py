"""Per-caller limits on the MCP endpoint, decided after authentication.

The caller is who it provably is: the authenticated principal (issuer, subject, client id of
the verified token), or without auth the TCP connection. Never a header the client writes: a
made-up `Mcp-Session-Id` or a second `Authorization` header must not make a new caller (the
guard refuses repeated headers before this runs). Two limits are keyed on it: the requests it
may have in flight (429 beyond) and the MCP sessions it may hold open (429 beyond).

The caller key is also left in the request's state (`request.state.mcpkit_caller`) for the
layers below, so limits further in can use the same identity.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import TYPE_CHECKING

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpkit.transport.guard import refuse
from mcpkit.transport.sessions import opening_caller

if TYPE_CHECKING:
    from mcpkit.transport.sessions import SessionManager

__all__ = ["CALLER_STATE_KEY", "ClientGate", "caller_key"]

CALLER_STATE_KEY = "mcpkit_caller"


def caller_key(scope: Scope) -> str:
    """Who is calling: `p:<digest of the verified principal>`, else `c:<host>:<port>` of the connection.

    Keyed by a digest so neither the token nor a long subject is kept; a connection, never an
    address, because a proxy or NAT shares one address among many callers.
    """
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        who = authorization_context(user)
        text = "\0".join(str(who[k] or "") for k in ("issuer", "subject", "client_id"))
        return "p:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    client = scope.get("client")
    return f"c:{client[0]}:{client[1]}" if client else "c:unknown"


class ClientGate:
    """Caps each caller's requests in flight and, with `sessions`, its open sessions.

    Over `max_concurrent` a POST gets 429 with `Retry-After: 1`; a request that would open a
    session when the caller already holds `sessions.max_per_client` gets 429 too (the session
    manager checks again under its lock, so a race cannot exceed the quota).
    """

    def __init__(self, app: ASGIApp, *, max_concurrent: int, sessions: SessionManager | None = None) -> None:
        self.app = app
        self.max_concurrent = max_concurrent
        self.sessions = sessions
        self._in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = caller_key(scope)
        scope.setdefault("state", {})[CALLER_STATE_KEY] = key
        if scope["method"] != "POST":  # GET streams and DELETE: bounded by the session quota
            await self.app(scope, receive, send)
            return
        if self._in_flight[key] >= self.max_concurrent:
            await refuse(send, 429, "Too many concurrent requests from this client.", retry_after=1)
            return
        sessions = self.sessions
        opens = sessions is not None and _opens_session(scope)
        if opens and sessions is not None and sessions.at_quota(key):
            await refuse(send, 429, "This client has too many open sessions; end one (DELETE) first.")
            return
        self._in_flight[key] += 1
        token = opening_caller.set(key) if opens else None
        try:
            await self.app(scope, receive, send)
        finally:
            if token is not None:
                opening_caller.reset(token)
            self._in_flight[key] -= 1
            if not self._in_flight[key]:
                del self._in_flight[key]


def _opens_session(scope: Scope) -> bool:
    """A handshake-era POST without a session id: if it succeeds, a stateful session opens."""
    version = None
    for name, value in scope["headers"]:
        if name == b"mcp-session-id":
            return False
        if name == b"mcp-protocol-version":
            version = value.decode("latin-1")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
