"""One watchdog thread for every call's deadline, instead of a timer thread per call.

Starting a thread per call costs more than a pooled query on a busy machine; the deadlines of all
calls wait in one heap, served by one daemon thread. An alarm that comes due runs its action in a
thread of its own (rare: the database's own timeout normally ends the statement first), and
`Alarm.disarm` waits for an action already under way, so an interrupt meant for one call can never
land on the next call that reuses the connection.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["Alarm", "arm"]

_PENDING: Final = 0
_FIRING: Final = 1
_DONE: Final = 2
_DISARMED: Final = 3


class Alarm:
    """One armed deadline; `disarm` it when the work ends."""

    __slots__ = ("_action", "_state", "when")

    def __init__(self, when: float, action: Callable[[], None]) -> None:
        self.when = when
        self._action = action
        self._state = _PENDING

    def disarm(self) -> bool:
        """Stop the alarm; if it had already fired, wait for its action to finish.

        Returns:
            Whether the action ran (or was running).
        """
        with _cv:
            if self._state == _PENDING:
                self._state = _DISARMED
                return False
            while self._state == _FIRING:
                _cv.wait()
            return self._state == _DONE


_cv = threading.Condition()
_heap: list[tuple[float, int, Alarm]] = []
_order = itertools.count()
_thread: threading.Thread | None = None


def arm(delay_s: float, action: Callable[[], None]) -> Alarm:
    """Run `action` (in its own thread) after `delay_s` unless the alarm is disarmed first."""
    global _thread
    alarm = Alarm(time.monotonic() + delay_s, action)
    with _cv:
        heapq.heappush(_heap, (alarm.when, next(_order), alarm))
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="mcpkit-sql-watchdog", daemon=True)
            _thread.start()
        if _heap[0][2] is alarm:  # due before whatever the thread waits for now
            _cv.notify_all()
    return alarm


def _fire(alarm: Alarm) -> None:
    try:
        alarm._action()
    finally:
        with _cv:
            alarm._state = _DONE
            _cv.notify_all()


def _serve() -> None:
    while True:
        with _cv:
            while _heap and _heap[0][2]._state == _DISARMED:
                heapq.heappop(_heap)
            if not _heap:
                _cv.wait()
                continue
            wait = _heap[0][0] - time.monotonic()
            if wait > 0:
                _cv.wait(wait)
                continue
            alarm = heapq.heappop(_heap)[2]
            alarm._state = _FIRING
        threading.Thread(target=_fire, args=(alarm,), name="mcpkit-sql-interrupt", daemon=True).start()
