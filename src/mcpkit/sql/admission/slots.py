"""How many calls analyse at once, and the wall-clock ceiling of the analysis running in this thread.

Analysis is pure Python under one GIL: six concurrent 1.4 s analyses each took ~6 s of wall time,
all passed the 5 s deadline and were refused although each passes alone, while every other
caller's `select 1` waited up to 2.6 s (red team rt33a F3). So at most `os.cpu_count()` calls
with a text longer than `QUEUED_FROM` analyse at once and the others queue (the wait counts
against the call's own timeout, not the analysis budget), while shorter texts, cheap to analyse,
never wait; the budget is measured in the analysing thread's CPU time (`AnalysisBudget.deadline`),
with the call's timeout as the wall-clock ceiling. A proven caller (`analysis_caller`, the
authenticated principal) analyses one long text at a time, so one caller's burst holds one slot
and others' long texts still get the rest. A short text that analyses slowly all the same (60
guarded LOCATEs in 1,420 characters: 2.5 s; four at once delayed every other caller's `select 1` to
1 s, red team v3 F3) takes its slot at the first budget check past `SLOW_S` of CPU (`queue_if_slow`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Final

from mcpkit.sql.errors import QueryTimeout

__all__ = [
    "ANALYSIS_SLOTS",
    "QUEUED_FROM",
    "SLOW_S",
    "analysis_caller",
    "analysis_slot",
    "past_wall_ceiling",
    "queue_if_slow",
]

ANALYSIS_SLOTS: Final = max(1, os.cpu_count() or 1)
"""Calls with long texts that may analyse at once in one process."""
QUEUED_FROM: Final = 2_000
"""Characters from which a call's text takes a slot (shorter ones analyse in well under 0.1 s)."""

SLOW_S: Final = 0.05
"""CPU seconds of analysis after which a short text takes a slot too."""

_slots = threading.BoundedSemaphore(ANALYSIS_SLOTS)
_local = threading.local()
_callers: dict[str, tuple[threading.Lock, int]] = {}  # principal -> its lock, calls holding or awaiting it
_guard = threading.Lock()


@contextmanager
def analysis_caller(principal: str | None) -> Iterator[None]:
    """Name the proven caller of the calls this thread runs meanwhile (None: no one proven, only the
    process-wide slots apply)."""
    previous = getattr(_local, "caller", None)
    _local.caller = principal
    try:
        yield
    finally:
        _local.caller = previous


@contextmanager
def _one_per_caller(principal: str, until: float, wall_s: float) -> Iterator[None]:
    with _guard:
        lock, users = _callers.get(principal, (threading.Lock(), 0))
        _callers[principal] = (lock, users + 1)
    try:
        if not lock.acquire(timeout=max(0.0, until - time.monotonic())):
            raise QueryTimeout(wall_s)
        try:
            yield
        finally:
            lock.release()
    finally:
        with _guard:
            lock, users = _callers[principal]
            if users > 1:
                _callers[principal] = (lock, users - 1)
            else:
                del _callers[principal]


@contextmanager
def analysis_slot(
    wall_s: float, size: int = QUEUED_FROM, slots: threading.BoundedSemaphore | None = None
) -> Iterator[None]:
    """Hold one analysis slot (waiting at most `wall_s`) for a text of `size` characters from
    `QUEUED_FROM` on, with a wall-clock ceiling `wall_s` from now.

    >>> with analysis_slot(5.0, size=10):
    ...     past_wall_ceiling()
    False

    Raises:
        QueryTimeout: no slot freed up within `wall_s`.
    """
    started = time.monotonic()
    previous = getattr(_local, "ceiling", None), getattr(_local, "pending", None)
    with ExitStack() as stack:
        take = _taker(stack, started + wall_s, wall_s, _slots if slots is None else slots)
        _local.pending = None if size >= QUEUED_FROM else (time.thread_time(), take)
        if size >= QUEUED_FROM:
            take()
        _local.ceiling = started + wall_s
        stack.callback(_restore, *previous)
        yield


def _taker(
    stack: ExitStack, until: float, wall_s: float, held: threading.BoundedSemaphore
) -> Callable[[], None]:
    def take() -> None:
        caller: str | None = getattr(_local, "caller", None)
        if caller is not None:
            stack.enter_context(_one_per_caller(caller, until, wall_s))
        if not held.acquire(timeout=max(0.0, until - time.monotonic())):
            raise QueryTimeout(wall_s)
        stack.callback(held.release)

    return take


def _restore(ceiling: float | None, pending: tuple[float, Callable[[], None]] | None) -> None:
    _local.ceiling, _local.pending = ceiling, pending


def queue_if_slow() -> None:
    """Take this thread's analysis slot now if its short text has taken over `SLOW_S` of CPU.

    Raises:
        QueryTimeout: no slot freed up within the call's wall-clock ceiling.
    """
    pending: tuple[float, Callable[[], None]] | None = getattr(_local, "pending", None)
    if pending is not None and time.thread_time() - pending[0] > SLOW_S:
        _local.pending = None
        pending[1]()


def past_wall_ceiling() -> bool:
    """Whether the analysis in this thread has passed its call's wall-clock ceiling."""
    ceiling: float | None = getattr(_local, "ceiling", None)
    return ceiling is not None and time.monotonic() > ceiling
