"""Pooled connections reset off the call's path.

A clean call's answer does not wait for its connection's reset (a round trip to the database):
the session's end (reset, then check-in) goes to a worker thread, the connection still checked
out of the pool, and starts once the handler's answer is written (`mcpkit.threads.after_answer`),
or after `ANSWER_WAIT_S` at the latest (an event loop that stopped cannot keep a connection out).
The connection goes back to the pool only once its reset succeeded, so no later call can be
handed a connection whose reset is still under way (it waits for a free connection as it would
for a busy one); a failed reset closes the connection. A handler that opens another session of
the same engine lets its earlier one's reset start at once (`settle_here`). `close` waits for
every reset under way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial
from typing import Final

from mcpkit.threads import after_answer

__all__ = ["ANSWER_WAIT_S", "Resets"]

log = logging.getLogger("mcpkit.sql")

ANSWER_WAIT_S: Final = 0.005
"""How long a reset waits for its call's answer to be written before it starts anyway."""


class Resets:
    """Runs the end of pooled calls (reset, then check-in) in at most `workers` worker threads."""

    def __init__(self, workers: int) -> None:
        self._workers = max(1, workers)
        self._lock = threading.RLock()  # `_done` may run inside `hand_over`
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        self._pending: set[Future[None]] = set()
        self._here = threading.local()  # .answered: the event the last deferred end waits for

    def defer(self, finish: Callable[[], None], call_id: str) -> None:
        """Run `finish` in a worker thread once the call has its answer (`ANSWER_WAIT_S` at most)."""
        answered = threading.Event()
        after_answer(answered.set)  # outside a handler thread: set now
        self._here.answered = answered
        self.hand_over(partial(_when, answered, finish), call_id)

    def settle_here(self) -> None:
        """Before this thread takes another connection: let the reset it deferred start now."""
        answered: threading.Event | None = getattr(self._here, "answered", None)
        if answered is not None:
            self._here.answered = None
            answered.set()

    def hand_over(self, finish: Callable[[], None], call_id: str) -> None:
        """Run `finish` (reset the connection, then return or close it) in a worker thread; here
        when this has been closed (the engine is going away: nothing is left to overlap)."""
        with self._lock:
            if not self._closed and self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="mcpkit-sql-reset")
            pool = None if self._closed else self._pool
            if pool is not None:
                try:
                    future = pool.submit(_guarded, finish, call_id)
                    self._pending.add(future)
                    future.add_done_callback(self._done)
                    return
                except RuntimeError:  # the interpreter is shutting down: no new threads
                    pass
        _guarded(finish, call_id)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every reset handed over so far has ended; False if `timeout_s` passed first."""
        with self._lock:
            pending = list(self._pending)
        return not wait(pending, timeout=timeout_s).not_done

    def close(self) -> None:
        """Wait for every reset under way; later ones run in the caller's thread."""
        with self._lock:
            self._closed, pool, self._pool = True, self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _when(answered: threading.Event, finish: Callable[[], None]) -> None:
    answered.wait(ANSWER_WAIT_S)
    finish()


def _guarded(finish: Callable[[], None], call_id: str) -> None:
    try:
        finish()
    except Exception:  # `finish` drops a connection it could not reset; anything else is a bug
        log.exception("sql call %s: ending the call in the background failed", call_id)
