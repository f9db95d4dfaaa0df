"""`AuditLog`: entries are written before the call goes on, several calls sharing one commit.

A call hands its entry to the writer thread and waits for the commit that holds it (`write` from
the event loop, `write_blocking` from a thread). The writer takes everything queued at that moment
and appends it in one transaction, so concurrent calls share one commit (and one fsync: group
commit) while a lone call waits for exactly one. The wait is the price of the promise: a call's
start is stored before its tool runs, its end before its answer is sent. When the store fails, the
waiters get `AuditUnavailable` and the call is refused (fail closed): nothing runs unrecorded.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

import anyio.to_thread
from sqlalchemy.exc import OperationalError

from mcpkit.sql.audit.store import AuditStore

__all__ = ["AuditLog", "AuditUnavailable"]

log = logging.getLogger("mcpkit.sql.audit")

_STOP: Final = object()
Done = Callable[[BaseException | None], None]


class AuditUnavailable(RuntimeError):
    """The store could not take the entry; the call must not go on."""


class AuditLog:
    """The audit trail of one server.

    Args:
        store: Where entries are appended (its `sync` decides how durable "written" is).
        batch: Most entries per transaction.
        timeout_s: Longest a call waits for its entry to be stored before it is refused.
    """

    def __init__(self, store: AuditStore, *, batch: int = 500, timeout_s: float = 10.0) -> None:
        self.store = store
        self.batch = batch
        self.timeout_s = timeout_s
        self.written = 0
        self.failed = 0
        self.commits = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mcpkit-audit", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # --- call path ----------------------------------------------------------------------------

    def submit(self, entry: dict[str, Any], done: Done) -> None:
        """Queue one entry; `done(None)` once it is stored, `done(error)` if it cannot be."""
        if self._closed:
            done(AuditUnavailable("the audit log is closed"))
            return
        self._queue.put((entry, done))

    async def write(self, entry: dict[str, Any]) -> None:
        """Store one entry before returning (without blocking the event loop).

        Raises:
            AuditUnavailable: the store failed or did not answer within `timeout_s`.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend (trio): wait in a worker thread instead
            await anyio.to_thread.run_sync(self.write_blocking, entry)
            return
        future: asyncio.Future[BaseException | None] = loop.create_future()

        def done(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_settle, future, error)

        self.submit(entry, done)
        try:
            error = await asyncio.wait_for(asyncio.shield(future), self.timeout_s)
        except TimeoutError:
            raise AuditUnavailable(f"the audit store did not answer within {self.timeout_s:g} s") from None
        if error is not None:
            raise AuditUnavailable(str(error)) from error

    def write_blocking(self, entry: dict[str, Any]) -> None:
        """`write` for a thread that may block.

        Raises:
            AuditUnavailable: the store failed or did not answer within `timeout_s`.
        """
        event = threading.Event()
        result: list[BaseException | None] = []

        def done(error: BaseException | None) -> None:
            result.append(error)
            event.set()

        self.submit(entry, done)
        if not event.wait(self.timeout_s):
            raise AuditUnavailable(f"the audit store did not answer within {self.timeout_s:g} s")
        if result[0] is not None:
            raise AuditUnavailable(str(result[0])) from result[0]

    # --- writer thread ------------------------------------------------------------------------

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            pending: list[tuple[dict[str, Any], Done]] = []
            while True:
                if item is _STOP:
                    stop = True
                else:
                    pending.append(item)
                if len(pending) >= self.batch:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if pending:
                self._commit(pending)

    def _commit(self, pending: list[tuple[dict[str, Any], Done]]) -> None:
        entries = [entry for entry, _ in pending if entry is not _MARK]
        errors: list[BaseException | None] = [None] * len(pending)
        try:
            if entries:
                self.store.append(entries)
                self.written += len(entries)
                self.commits += 1
        except Exception as exc:  # the store's own failure: each waiter is told, its call refused
            if len(entries) == 1:
                log.exception("audit store write failed; 1 call refused")
                self.failed += 1
                errors = [None if e is _MARK else exc for e, _ in pending]
            else:  # one bad entry must not refuse the others: write each alone, in order
                log.warning(
                    "audit group commit of %d entries failed (%s); writing each alone", len(entries), exc
                )
                errors = self._one_by_one(pending)
        for (_, done), error in zip(pending, errors, strict=True):
            try:
                done(error)
            except Exception:  # a waiter whose loop has closed
                log.debug("audit waiter gone", exc_info=True)

    def _one_by_one(self, pending: list[tuple[dict[str, Any], Done]]) -> list[BaseException | None]:
        errors: list[BaseException | None] = []
        down: BaseException | None = None  # the store itself is unreachable: the rest fail alike
        for entry, _ in pending:
            if entry is _MARK:
                errors.append(None)
                continue
            try:
                if down is not None:
                    raise down
                self.store.append([entry])
                self.written += 1
                self.commits += 1
                errors.append(None)
            except Exception as exc:
                log.exception("audit store write failed; 1 call refused")
                self.failed += 1
                down = exc if isinstance(exc, OperationalError) else None
                errors.append(exc)
        return errors

    # --- shutdown -----------------------------------------------------------------------------

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything queued so far is stored (True) or has failed or timed out (False)."""
        if not self._thread.is_alive():
            return self._queue.empty()
        event = threading.Event()
        ok: list[bool] = []

        def done(error: BaseException | None) -> None:
            ok.append(error is None)
            event.set()

        self._queue.put((_MARK, done))
        return event.wait(timeout_s) and ok == [True]

    def close(self, timeout_s: float = 10.0) -> None:
        """Finish what is queued, stop the writer and close the store; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("audit writer did not finish within %.1f s", timeout_s)
        self.store.close()
        atexit.unregister(self.close)

    def install_signal_handlers(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        """Close cleanly on SIGTERM (and any given signal), then do what the signal did before.

        Call from the main thread. A previous Python handler is called after closing; the default
        action is re-raised (the process still ends with the signal); an ignored signal stays ignored.
        """
        for signum in signals:
            previous = signal.getsignal(signum)
            signal.signal(signum, _chain(self, signum, previous))


_MARK: Final[dict[str, Any]] = {}
"""A flush marker: an entry with nothing to store."""


def _settle(future: asyncio.Future[BaseException | None], error: BaseException | None) -> None:
    if not future.done():
        future.set_result(error)


def _chain(audit: AuditLog, signum: int, previous: Any) -> Callable[[int, FrameType | None], None]:
    def handler(received: int, frame: FrameType | None) -> None:
        audit.close()
        if callable(previous):
            previous(received, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handler
