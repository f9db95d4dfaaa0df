"""Per-caller limits on the MCP endpoint, decided after authentication.

The caller is who it provably is: the authenticated principal (issuer, subject, client id of
the verified token), or without auth the TCP connection. Never a header the client writes: a
made-up `Mcp-Session-Id` or a second `Authorization` header must not make a new caller (the
guard refuses repeated headers before this runs). Two limits are keyed on it: the requests it
may have in flight (429 beyond) and the MCP sessions it may hold open (429 beyond). A session
(or, without one, a caller) may hold one standing GET stream; another gets 409.

A connection is named by an id no later connection can have (this process's random instance id
and a counter, set by `runner.timed_h11`), not by its address and port: a port is reused by the
next connection from it, which would otherwise inherit the last one's cache entries, rate
buckets and sessions, and two replicas sharing Redis would share it too.

The caller key is also left in the request's state (`request.state.mcpkit_caller`) for the
layers below, so limits further in can use the same identity.

A request's slot is held until its work ends, not until its HTTP answer does: in SSE mode the
SDK's ASGI app returns as soon as the client walks away while the call it started runs on (40
abandoned slow calls ran at once under a limit of 16). The gate hands the slot to the request's
context; `SlotMiddleware`, a middleware of the SDK's low-level server, holds it for as long as
each handler the request started runs (the SDK runs a handler in the context of the request
that sent its message, so the slot reaches it without any request-id bookkeeping).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpkit.threads import holding
from mcpkit.transport.guard import (
    CONNECTION_STATE_KEY,
    PEER_STATE_KEY,
    SERVER_INSTANCE,
    peek_small_body,
    refuse,
    sends_only_cancellations,
)
from mcpkit.transport.sessions import opening_caller

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    from mcpkit.transport.sessions import SessionManager

__all__ = ["CALLER_STATE_KEY", "ClientGate", "SlotMiddleware", "caller_key"]

CALLER_STATE_KEY = "mcpkit_caller"


class _Slot:
    """One gate slot, held by its request and by each handler the request started."""

    def __init__(self, free: Callable[[], None]) -> None:
        self._holders = 1
        self._free: Callable[[], None] | None = free

    def hold(self) -> bool:
        """Hold the slot; False once it is free (a context that outlived its request)."""
        if self._free is None:
            return False
        self._holders += 1
        return True

    def thread_hold(self) -> Callable[[], None] | None:
        """A hold for a handler's worker thread (`mcpkit.threads.holding`)."""
        return self.drop if self.hold() else None

    def drop(self) -> None:
        self._holders -= 1
        if self._holders == 0 and self._free is not None:
            free, self._free = self._free, None
            free()


_current_slot: ContextVar[_Slot | None] = ContextVar("mcpkit_gate_slot", default=None)


class SlotMiddleware:
    """Low-level server middleware: a handler holds its request's gate slot while it runs, and a
    sync handler's thread holds it until the thread ends (`mcpkit.threads`), even after a cancel."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        slot = _current_slot.get()
        if slot is None or not slot.hold():
            return await call_next(ctx)
        try:
            with holding(slot.thread_hold):
                return await call_next(ctx)
        finally:
            slot.drop()


def caller_key(scope: Scope) -> str:
    """Who is calling: `p:<digest of the verified principal>`, else `c:<connection id>`.

    Keyed by a digest so neither the token nor a long subject is kept; a connection, never an
    address, because a proxy or NAT shares one address among many callers. The connection id is
    unique to the connection (see the module docstring); under an ASGI server other than
    `run_http`'s, which names no connection, it falls back to this process and the peer's address
    and port, which a later connection from the same port shares (serve with auth there).
    """
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        who = authorization_context(user)
        text = "\0".join(str(who[k] or "") for k in ("issuer", "subject", "client_id"))
        return "p:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    # the TCP peer as the guard saw it, before a trusted proxy's X-Forwarded-For rewrote `client`
    state = scope.get("state") or {}
    connection = state.get(CONNECTION_STATE_KEY)
    if isinstance(connection, str):
        return f"c:{connection}"
    client = state[PEER_STATE_KEY] if PEER_STATE_KEY in state else scope.get("client")
    return f"c:{SERVER_INSTANCE}:{client[0]}:{client[1]}" if client else f"c:{SERVER_INSTANCE}:unknown"


class ClientGate:
    """Caps each caller's requests in flight and, with `sessions`, its open sessions.

    Over `max_concurrent` a POST gets 429 with `Retry-After: 1`; a request that would open a
    session when the caller already holds `sessions.max_per_client` gets 429 too (its place is
    reserved before the request goes on, so concurrent requests past the quota get 429 as well).
    A second standing GET stream of one session gets 409 (the SDK's own check runs too late to
    stop concurrent GETs). Without `resumable` (an event store) a GET's `Last-Event-ID` is
    ignored: there is nothing to replay, and the SDK would answer nothing at all (a 500).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_concurrent: int,
        sessions: SessionManager | None = None,
        resumable: bool = False,
    ) -> None:
        self.app = app
        self.max_concurrent = max_concurrent
        self.sessions = sessions
        self.resumable = resumable
        self._in_flight: Counter[str] = Counter()
        self._streams: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = caller_key(scope)
        scope.setdefault("state", {})[CALLER_STATE_KEY] = key
        if scope["method"] == "GET":  # a standing stream: one per session, sessions are bounded
            await self._stream(scope, receive, send, key)
            return
        if scope["method"] != "POST":  # DELETE
            await self.app(scope, receive, send)
            return
        if self._in_flight[key] >= self.max_concurrent:
            # the body is read after the gate, so a small one is peeked at here, only at the limit
            receive = await peek_small_body(scope, receive)
            if sends_only_cancellations(scope):  # ends work, starts none: never refused
                await self.app(scope, receive, send)
                return
            await refuse(send, 429, "Too many concurrent requests from this client.", retry_after=1)
            return
        sessions = self.sessions
        opening = None
        if sessions is not None and _opens_session(scope):
            opening = sessions.reserve(key)
            if opening is None:
                await refuse(send, 429, "This client has too many open sessions; end one (DELETE) first.")
                return
        self._in_flight[key] += 1
        slot = _Slot(partial(self._free, key))
        slot_token = _current_slot.set(slot)
        token = opening_caller.set(opening) if opening is not None else None
        try:
            await self.app(scope, receive, send)
        finally:
            if token is not None:
                opening_caller.reset(token)
            if opening is not None and sessions is not None:
                sessions.release(opening)
            _current_slot.reset(slot_token)
            slot.drop()  # the slot is free once the handlers this request started have ended too

    async def _stream(self, scope: Scope, receive: Receive, send: Send, key: str) -> None:
        headers = scope["headers"]
        sid = next((v for n, v in headers if n == b"mcp-session-id"), None)
        stream = "s:" + sid.decode("latin-1") if sid is not None else key
        if stream in self._streams:
            await refuse(send, 409, "This session already has an open event stream; use that one.")
            return
        if not self.resumable and any(n == b"last-event-id" for n, _ in headers):
            scope = {**scope, "headers": [(n, v) for n, v in headers if n != b"last-event-id"]}
        self._streams.add(stream)
        try:
            await self.app(scope, receive, send)
        finally:
            self._streams.discard(stream)

    @property
    def open_streams(self) -> int:
        """Standing GET streams open now."""
        return len(self._streams)

    def _free(self, key: str) -> None:
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
