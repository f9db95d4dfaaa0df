"""Sync handlers in worker threads, counted for as long as their threads really run.

A thread cannot be killed. When a sync handler's call is cancelled (`notifications/cancelled`, a
client walking away in stateless mode) or passes its deadline, the answer goes out at once (the
thread is abandoned) but the thread runs on until the handler returns. Whatever the call held
must stay held until then, or a limit is void: a caller at its concurrency limit could cancel
and re-send forever, each time leaving one more thread behind.

So `HandlerThreads.run`:

- takes a place among the server's `max_threads` before the thread starts, and gives it back
  when the handler returns, not when the call ends (a call waiting for a place waits under its
  own deadline, which answers `TIMEOUT` as a slow handler would);
- takes a hold on everything the surrounding layers registered with `holding` (the HTTP gate's
  per-caller slot does), released at the same moment;
- writes one operator line when a call leaves its thread behind, and one when that thread ends.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.lowlevel import RunVar

__all__ = [
    "DEFAULT_MAX_THREADS",
    "SWITCH_INTERVAL_S",
    "HandlerThreads",
    "Hold",
    "holding",
    "shorten_gil_waits",
]

log = logging.getLogger("mcpkit.threads")

T = TypeVar("T")

DEFAULT_MAX_THREADS = 40
"""anyio's own default thread count, now counted until each thread ends."""

Hold = Callable[[], Callable[[], None] | None]
"""Take a hold on something the current request owns; returns its release (None: nothing held)."""

SWITCH_INTERVAL_S = 0.001
"""The interpreter's switch interval while serving (Python's default is 5 ms)."""

_holds: ContextVar[tuple[Hold, ...]] = ContextVar("mcpkit_holds", default=())


@contextmanager
def holding(hold: Hold) -> Iterator[None]:
    """Within the block, a sync handler takes `hold()` before its thread starts and calls the
    release it returned once the thread ends (the release runs on the event loop's thread)."""
    token = _holds.set((*_holds.get(), hold))
    try:
        yield
    finally:
        _holds.reset(token)


def shorten_gil_waits() -> None:
    """Lower the process's switch interval to `SWITCH_INTERVAL_S` (never raise it).

    A handler thread gives up the GIL for every database round trip and must then wait for it
    while the event loop runs Python; with the default 5 ms interval a call that makes four
    such round trips can wait up to 20 ms for the GIL under load, on an idle CPU. For the blocking
    `run_http`/`run_stdio`, which own the process.
    """
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)


class HandlerThreads:
    """Runs sync handlers in worker threads, at most `max_threads` at once (see the module docstring)."""

    def __init__(self, max_threads: int = DEFAULT_MAX_THREADS) -> None:
        self.max_threads = max_threads
        self._limiter: RunVar[anyio.CapacityLimiter] = RunVar(f"mcpkit_handler_threads_{id(self):x}")
        self.lingering = 0
        """Threads still running whose calls have already ended (cancelled or past their deadline)."""

    def _capacity(self) -> anyio.CapacityLimiter:
        try:
            return self._limiter.get()
        except LookupError:  # one limiter per event loop, as anyio's own default limiter
            limiter = anyio.CapacityLimiter(self.max_threads)
            self._limiter.set(limiter)
            return limiter

    async def run(self, fn: Callable[..., T], *args: Any, name: str = "") -> T:
        """`fn(*args)` in a worker thread; its place and holds stay taken until `fn` returns."""
        limiter = self._capacity()
        run = _Run(limiter, name, _poster())
        await limiter.acquire_on_behalf_of(run)
        run.releases = [r for hold in _holds.get() if (r := hold()) is not None]
        try:
            return await anyio.to_thread.run_sync(run.call, fn, args, abandon_on_cancel=True)
        finally:
            if run.left_behind():
                self.lingering += 1
                run.on_end = self._ended
                log.warning(
                    "tool %r: its call ended but its thread runs on; it keeps its place until it returns",
                    name,
                )

    def _ended(self, run: _Run) -> None:
        self.lingering -= 1
        log.info("tool %r: the thread left behind has ended after %.1f s", run.name, run.elapsed())


class _Run:
    """One handler thread's bookkeeping, shared by the event loop and the thread under a lock."""

    def __init__(
        self, limiter: anyio.CapacityLimiter, name: str, post: Callable[[Callable[[], None]], Any]
    ) -> None:
        self.limiter = limiter
        self.name = name
        self._post = post
        self.releases: list[Callable[[], None]] = []
        self.on_end: Callable[[_Run], None] | None = None
        self._lock = threading.Lock()
        self._state = "queued"  # -> running -> done, or queued -> skipped, or running -> abandoned
        self._started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def call(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        with self._lock:
            if self._state == "skipped":  # the call ended before the thread picked it up
                raise RuntimeError("the call ended before its thread started")
            self._state = "running"
        try:
            return fn(*args)
        finally:
            with self._lock:
                abandoned = self._state == "abandoned"
                self._state = "done"
            if abandoned:  # nobody waits for this thread: it gives back its place itself
                try:
                    self._post(self.release)
                except RuntimeError:  # the event loop has gone: nothing is left to count
                    log.debug("tool %r: the event loop ended before its thread", self.name)

    def left_behind(self) -> bool:
        """Called on the event loop once the await ends: release now, unless the thread runs on."""
        with self._lock:
            if self._state == "running":
                self._state = "abandoned"
                return True
            if self._state == "queued":
                self._state = "skipped"
        self.release()
        return False

    def release(self) -> None:
        for release in self.releases:
            release()
        self.releases = []
        self.limiter.release_on_behalf_of(self)
        if self.on_end is not None:
            self.on_end(self)


def _poster() -> Callable[[Callable[[], None]], Any]:
    """How a worker thread hands a function to this event loop: asyncio's without waiting for it
    (a loop that has stopped must not block the thread for ever), else anyio's."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:  # another anyio backend (trio)
        return anyio.from_thread.run_sync
