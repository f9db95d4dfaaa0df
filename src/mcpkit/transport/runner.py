"""Run an mcpkit ASGI app under uvicorn: connection timeouts and a drain that loses no call.

Timeouts. uvicorn 0.55 (the pinned range) has an idle timeout between requests on a kept-alive
connection (`timeout_keep_alive`) and a cap on the size of a request head, but nothing bounds
how long a client may take to send the head, nor a connection that sends nothing at all: 150
connections trickling one header byte at a time stayed open indefinitely. `timed_h11` adds a
head timeout to uvicorn's own h11 protocol (from the moment the connection opens or the previous
response ends until the head is complete: 408 and close); the body timeout is the guard's.

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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from mcpkit.transport.guard import ServingState

__all__ = ["sse_drain", "timed_h11"]

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 16\r\nconnection: close\r\n\r\nRequest Timeout\n"
)


def timed_h11(head_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request head takes over `head_timeout_s`."""

    class TimedH11(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._head_timer is not None and self.conn.their_state is not h11.IDLE:
                self._disarm()  # the head is complete (the body has the guard's timeout)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's head gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(head_timeout_s, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self.cycle is None or self.cycle.response_complete:
                self.transport.write(_TIMEOUT_RESPONSE)
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
