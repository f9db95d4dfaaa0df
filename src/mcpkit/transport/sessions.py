"""Stateful MCP sessions with a per-caller quota on top of the SDK's server-wide cap.

The SDK's `StreamableHTTPSessionManager` caps the sessions of the whole server (`max_sessions`,
503 beyond) and frees a session's memory when it ends (DELETE, idle expiry, crash): measured at
about 36 KiB per open session and under 1 KiB left after 200 sessions ended (see
tests/transport/test_sessions.py). What it lacks is a per-caller quota, without which one caller
fills the table and locks everyone else out. This subclass adds it at the SDK's two session
hooks (`_admit_session`, under the creation lock, and `_discard_session`); the caller is the
gate's caller key, handed over in a context variable for the request that opens the session.
The gate reserves a place in the caller's quota before the request goes on (`reserve`, with no
await between the check and the count), so concurrent initializes past the quota get the gate's
429, never the SDK's server-wide 503; the reservation becomes the session when it opens.
The hooks are private to mcp 2.3 (pinned `<2.4`): the session tests fail if they move.
"""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = ["Opening", "SessionManager", "opening_caller"]


@dataclass
class Opening:
    """A place in a caller's session quota, reserved by a request that may open a session."""

    caller: str
    reserved: bool = True


opening_caller: ContextVar[Opening | None] = ContextVar("mcpkit_opening_caller", default=None)
"""The reservation of the request being served, set by the gate when the request may open a session."""


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, holding each caller to `max_per_client` open sessions."""

    def __init__(self, *args: Any, max_per_client: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if max_per_client is not None and max_per_client <= 0:
            raise ValueError("max_per_client must be a positive number of sessions or None")
        self.max_per_client = max_per_client
        self._owner: dict[str, str] = {}
        self._held: Counter[str] = Counter()
        self._pending: Counter[str] = Counter()

    def open_sessions(self, caller: str | None = None) -> int:
        """Sessions open now: all of them, or those `caller` opened."""
        return len(self._server_instances) if caller is None else self._held[caller]

    def callers(self) -> dict[str, int]:
        """Open sessions per caller (those that opened at least one still open)."""
        return dict(self._held)

    def at_quota(self, caller: str) -> bool:
        """Whether `caller` may not open another session (open ones and reserved places count)."""
        return (
            self.max_per_client is not None
            and self._held[caller] + self._pending[caller] >= self.max_per_client
        )

    def reserve(self, caller: str) -> Opening | None:
        """A place in `caller`'s quota for a request that may open a session; None at the quota.

        Synchronous, so concurrent requests cannot all pass the check; `release` it when the
        request ends (a no-op once the session opened and took the place over).
        """
        if self.at_quota(caller):
            return None
        self._pending[caller] += 1
        return Opening(caller)

    def release(self, opening: Opening) -> None:
        """Give back a reserved place that no session took over."""
        if opening.reserved:
            opening.reserved = False
            self._pending[opening.caller] -= 1
            if self._pending[opening.caller] <= 0:
                del self._pending[opening.caller]

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        opening = opening_caller.get()
        if opening is not None and not opening.reserved and self.at_quota(opening.caller):
            return None  # cannot happen through the gate, which reserved the place
        transport = super()._admit_session(requestor)
        if transport is not None and opening is not None and transport.mcp_session_id is not None:
            self.release(opening)  # the session takes the reserved place over
            self._owner[transport.mcp_session_id] = opening.caller
            self._held[opening.caller] += 1
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        caller = self._owner.pop(session_id, None)  # the SDK may discard twice (DELETE, then task end)
        if caller is not None:
            self._held[caller] -= 1
            if self._held[caller] <= 0:
                del self._held[caller]
        await super()._discard_session(session_id, transport)
