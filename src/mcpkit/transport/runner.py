"""Run an mcpkit ASGI app under uvicorn: connection timeouts and a drain that loses no call.

Timeouts. uvicorn 0.55 (the pinned range) has an idle timeout between requests on a kept-alive
connection (`timeout_keep_alive`) and a cap on the size of a request head, but nothing bounds
how long a client may take to send the head, nor a connection that sends nothing at all: 150
connections trickling one header byte at a time stayed open indefinitely. `timed_h11` adds a
head and a body deadline to uvicorn's own h11 protocol (408 and close).

Drain. On SIGTERM uvicorn stops accepting, lets running requests finish (up to `graceful_s`),
then runs the lifespan shutdown. But the SDK answers a call in SSE mode with sse-starlette's
`EventSourceResponse`, and sse-starlette ends every SSE response as soon as it sees uvicorn's
exit flag (it patches `Server.handle_exit` and polls `should_exit`): the six calls in flight got
HTTP 200 with an empty stream. That is right for the standing GET stream, wrong for a call's
answer. `sse_drain` turns sse-starlette's automatic drain off while serving and sets its exit
flag itself once the guard counts no call in flight, which ends the GET streams so the process
exits promptly instead of waiting out `graceful_s`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from mcpkit.transport.guard import CONNECTION_STATE_KEY, SERVER_INSTANCE

if TYPE_CHECKING:
    from mcpkit.transport.guard import ServingState

__all__ = ["sse_drain", "timed_h11"]

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 16\r\nconnection: close\r\n\r\nRequest Timeout\n"
)


def timed_h11(head_timeout_s: float, body_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a deadline on every request's head and body.

    The head must arrive within `head_timeout_s` of the connection opening or the previous
    response ending; the body within `body_timeout_s` (plus a second's grace, so the guard's own
    408 for the MCP endpoint goes first) of the head ending. The body deadline holds for every
    request, also one the app answered without reading its body (a 404, `/healthz`, a 413):
    uvicorn discards the rest of such a body and would otherwise keep the connection open for as
    long as the client trickles it, since each byte cancels its keep-alive timer.

    Each connection also gets an id no other connection of any process has (the process's
    instance id and a counter), left in every request's state for the gate's caller key.
    """
    numbers = itertools.count(1)

    class TimedH11(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _body_timed: bool = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # uvicorn copies app_state into each request's scope["state"]: this copy is the connection's
            self.app_state = {**self.app_state, CONNECTION_STATE_KEY: f"{SERVER_INSTANCE}.{next(numbers)}"}
            self._arm(head_timeout_s)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._follow()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _follow(self) -> None:
            """Keep the one deadline that fits where the peer's request stands."""
            state = self.conn.their_state
            if state is h11.IDLE:
                if self._timer is None or self._body_timed:
                    self._body_timed = False
                    self._arm(head_timeout_s)  # the next request's head gets its own deadline
            elif state is h11.SEND_BODY:
                if not self._body_timed:
                    self._body_timed = True
                    self._arm(body_timeout_s + 1.0)
            elif self._timer is not None:  # the request is complete: the app's answer is not timed
                self._disarm()

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._timer = self.loop.call_later(seconds, self._timed_out)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _timed_out(self) -> None:
            self._timer = None
            state = self.conn.their_state
            if self.transport.is_closing() or state not in (h11.IDLE, h11.SEND_BODY):
                return
            cycle = self.cycle
            head_late = state is h11.IDLE and (cycle is None or cycle.response_complete)
            if head_late or (state is h11.SEND_BODY and cycle is not None and not cycle.response_started):
                self.transport.write(_TIMEOUT_RESPONSE)  # else an answer was sent: just close
            self.transport.close()

    return TimedH11


@contextmanager
def sse_drain(state: ServingState) -> Iterator[None]:
    """While serving: SSE answers outlive the exit signal; GET streams end once no call is in flight."""
    from sse_starlette.sse import AppStatus

    automatic = AppStatus.enable_automatic_graceful_drain
    AppStatus.enable_automatic_graceful_drain = False

    def release(*_: Any) -> None:
        AppStatus.should_exit = True

    state.on_quiet.append(release)
    try:
        yield
    finally:
        state.on_quiet.remove(release)
        AppStatus.should_exit = False  # process-global: a later server in this process starts clean
        if automatic:
            AppStatus.enable_automatic_graceful_drain = True
