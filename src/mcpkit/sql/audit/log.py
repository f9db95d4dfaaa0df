"""`AuditLog`: records go on a queue; one background thread writes them in batches.

`record()` never blocks and never touches the database: it puts the record on a queue and
returns (a fraction of a microsecond). The writer thread gathers records for `linger_s` and inserts
them in one transaction (up to `batch` records). `close()` (also run at exit and, once
`install_signal_handlers()` is called, on SIGTERM) flushes what is queued before returning, so a
server stopped right after answering keeps its records. If the store fails, the batch is kept
and retried; past `max_queued` pending records, new ones are dropped and counted in `dropped`.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from mcpkit.sql.audit.record import AuditRecord
from mcpkit.sql.audit.store import AuditStore

__all__ = ["AuditLog"]

log = logging.getLogger("mcpkit.sql.audit")

_STOP: Final = object()


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


class AuditLog:
    """The audit trail of one server.

    Args:
        store: Where records are written.
        batch: Most records per insert.
        linger_s: How long the writer gathers records before one insert. 50 ms keeps the
            writer's transactions (and its share of the GIL) off the calls' way; 0 writes as
            soon as the queue is empty. Shutdown flushes whatever is gathered.
        max_queued: Records kept in memory while the store is slow or down.
    """

    def __init__(
        self, store: AuditStore, *, batch: int = 500, linger_s: float = 0.05, max_queued: int = 100_000
    ) -> None:
        self.store = store
        self.batch = batch
        self.linger_s = linger_s
        self.max_queued = max_queued
        self.dropped = 0
        self.written = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending: list[AuditRecord] = []
        self._failures = 0
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mcpkit-audit", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # --- call path ----------------------------------------------------------------------------

    def record(self, rec: AuditRecord) -> None:
        """Queue one record; returns at once."""
        if self._closed:
            log.warning("audit log closed; record of call %s not written", rec.call_id)
            return
        if self._queue.qsize() >= self.max_queued:
            self.dropped += 1
            return
        self._queue.put(rec)

    # --- writer thread ------------------------------------------------------------------------

    def _next(self, timeout: float | None) -> Any:
        try:
            return (
                self._queue.get(timeout=timeout)
                if timeout is None or timeout > 0
                else self._queue.get_nowait()
            )
        except queue.Empty:
            return None

    def _run(self) -> None:
        stop = False
        while not stop:
            # Idle: block. Records kept after a failed write: retry after a backoff.
            wait = min(5.0, 0.1 * 2**self._failures) if self._pending else None
            item = self._next(wait)
            deadline = time.monotonic() + self.linger_s
            waiters: list[_Flush] = []
            while item is not None:
                if item is _STOP:
                    stop = True
                elif isinstance(item, _Flush):
                    waiters.append(item)
                else:
                    self._pending.append(item)
                if len(self._pending) >= self.batch:
                    break
                lingering = not (stop or waiters)
                item = self._next(deadline - time.monotonic() if lingering else 0)
            ok = self._write()
            self._failures = 0 if ok else self._failures + 1
            for w in waiters:
                w.done.set()

    def _write(self) -> bool:
        while self._pending:
            chunk = self._pending[: self.batch]
            try:
                self.store.write(chunk)
            except Exception:
                log.exception("audit store write failed; %d record(s) kept for retry", len(self._pending))
                overflow = len(self._pending) - self.max_queued
                if overflow > 0:
                    del self._pending[:overflow]
                    self.dropped += overflow
                return False
            del self._pending[: len(chunk)]
            self.written += len(chunk)
        return True

    # --- shutdown -----------------------------------------------------------------------------

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything queued so far is written (or `timeout_s` passes)."""
        if not self._thread.is_alive():
            return not self._pending and self._queue.empty()
        marker = _Flush()
        self._queue.put(marker)
        return marker.done.wait(timeout_s) and not self._pending

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush, stop the writer and close the store; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("audit writer did not finish within %.1f s; records may be lost", timeout_s)
        elif self._pending:
            log.error("audit store unavailable at shutdown; %d record(s) lost", len(self._pending))
        self.store.close()
        atexit.unregister(self.close)

    def install_signal_handlers(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        """Flush on SIGTERM (and any given signal) first, then do what the signal did before.

        Call from the main thread. A previous Python handler is called after the flush; the
        default action is re-raised (the process still ends with the signal); an ignored
        signal stays ignored.
        """
        for signum in signals:
            previous = signal.getsignal(signum)
            signal.signal(signum, _chain(self, signum, previous))


def _chain(audit: AuditLog, signum: int, previous: Any) -> Callable[[int, FrameType | None], None]:
    def handler(received: int, frame: FrameType | None) -> None:
        audit.close()
        if callable(previous):
            previous(received, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handler
