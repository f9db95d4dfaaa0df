"""The running call's deadline, per thread, for the functions mcpkit registers on SQLite connections.

SQLite checks its progress handler only at jump opcodes, never inside a function: each bounded
function (`sqlite_text`, `sqlite_fts5`) asks here before work no deadline could stop once started.
"""

from __future__ import annotations

import threading
import time

__all__ = ["call_deadline", "expire_call", "overruns", "past_deadline"]

_local = threading.local()


def call_deadline(deadline: float | None) -> None:
    """The running call's deadline (`time.monotonic()`) for this thread's private connection."""
    _local.deadline = deadline


def past_deadline() -> bool:
    """Whether this thread's call is past its deadline (a bounded function failing then timed out)."""
    deadline: float | None = getattr(_local, "deadline", None)
    return deadline is not None and time.monotonic() > deadline


def overruns(seconds: float) -> bool:
    """Whether `seconds` of work no deadline stops would end over a second past the call's deadline."""
    deadline: float | None = getattr(_local, "deadline", None)
    return deadline is not None and seconds > 1 and seconds > deadline - time.monotonic() + 1


def expire_call() -> None:
    """Put this thread's call past its deadline now: a function refused work that would overrun it
    (where SQLite reports the refusal in its own words, the call still counts as timed out)."""
    if getattr(_local, "deadline", None) is not None:
        _local.deadline = float("-inf")
