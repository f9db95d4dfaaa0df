"""One bound on all of SQLite's memory in this process: `PRAGMA hard_heap_limit`.

SQLITE_LIMIT_LENGTH bounds one value, not a call: a subquery's row holds all its columns at once
and a window buffers its partition (one call reached 1.2 GB with twelve 32 MB columns). SQLite has
no per-connection memory limit, only the process-wide hard heap limit: past it every allocation
fails, the statement ends with SQLITE_NOMEM (Python's `MemoryError`, a `resource` failure) and
frees what it held. The limit is what every SQLite source's pool may need (per connection: one
call's share and its page cache), plus `RESERVE` for the audit store and the bounded functions'
private connections, and at most `CEILING`. It counts SQLite's allocations only, not Python's.

The limit belongs to the process, so the application embedding mcpkit comes first: a limit it set
before the first pool (or changes while pools live) is never lowered nor raised, only reported, and
mcpkit's calls are bounded by it. Otherwise mcpkit sets the limit while a pool is open (its engine
not yet closed nor collected) and puts back what was there (no limit) when the last one goes.
"""

from __future__ import annotations

import _sqlite3
import ctypes
import logging
import sqlite3
import threading
import weakref
from collections.abc import Callable
from contextlib import closing
from typing import Final, cast

__all__ = ["CEILING", "PAGE_CACHE", "RESERVE", "forget_all", "heap_limit", "release", "reserve"]

PAGE_CACHE: Final = 4 * 1024 * 1024
"""Per connection: its page cache (SQLite's default `cache_size` is 2,000 KiB), schema and statements."""
RESERVE: Final = 64 * 1024 * 1024
"""Outside the pools: the audit store, `sqlite_text`'s private connections, start-up checks."""
CEILING: Final = 1024 * 1024 * 1024
"""The limit never exceeds this, however many connections the pools hold."""

log = logging.getLogger("mcpkit.sql")
_lock = threading.RLock()
_shares: dict[int, int] = {}


class _Held:
    """The limit mcpkit set last; None while it sets none (no pool, or the application's limit).
    `soft` is the application's soft heap limit before the first pool: setting a hard limit caps
    the soft one at it, and setting none clears it (red team my18 F5), so it is put back after."""

    ours: int | None = None
    soft: int = 0


_held = _Held()


def heap_limit() -> int:
    """The limit the live pools add up to; 0 (none, SQLite's default) while there is none."""
    with _lock:
        return min(CEILING, RESERVE + sum(_shares.values())) if _shares else 0


def reserve(owner: object, connections: int, per_call: int) -> int:
    """Count `owner`'s pool (at least one connection, each `per_call` plus its page cache) in the
    limit until `release(owner)` or until `owner` is gone, and apply the limit now; returns the
    limit in force."""
    key = id(owner)
    with _lock:
        first, new = not _shares, key not in _shares
        _shares[key] = max(connections, 1) * (per_call + PAGE_CACHE)
        applied = _apply(first=first)
    if new:
        weakref.finalize(owner, _release, key)
    return applied


def release(owner: object) -> int:
    """Stop counting `owner`'s pool (its engine closed); returns the limit in force."""
    return _release(id(owner))


def forget_all() -> None:
    """In a fork of this process (the SQLite worker zygote): its pools are not this process's;
    the limit they set goes with them (the worker's own pool sets its own)."""
    with _lock:
        for key in list(_shares):
            _release(key)


def _release(key: int) -> int:
    with _lock:
        if _shares.pop(key, None) is None:
            return _current()
        return _apply()


def _c_setter(name: str = "sqlite3_hard_heap_limit64") -> Callable[[int], int] | None:
    """SQLite's `sqlite3_hard_heap_limit64` (or `name`), from the library the sqlite3 module uses
    (ctypes finds it through `_sqlite3`'s own dependencies); None where it is not exported."""
    try:
        setter = getattr(ctypes.CDLL(_sqlite3.__file__), name)
    except (OSError, AttributeError):
        return None
    setter.restype = ctypes.c_int64
    setter.argtypes = [ctypes.c_int64]
    return cast(Callable[[int], int], setter)


_SET: Final = _c_setter()
_SOFT: Final = _c_setter("sqlite3_soft_heap_limit64")


def _soft(limit: int = -1) -> int:
    """The soft heap limit (a negative `limit` reads it), or 0 where it cannot be read."""
    if _SOFT is not None:
        return int(_SOFT(limit))
    with closing(sqlite3.connect(":memory:")) as conn:
        if limit >= 0:
            conn.execute(f"PRAGMA soft_heap_limit = {int(limit)}")
        return int(conn.execute("PRAGMA soft_heap_limit").fetchone()[0])


def _current() -> int:
    if _SET is not None:
        return int(_SET(-1))  # a negative argument reads the limit without changing it
    with closing(sqlite3.connect(":memory:")) as conn:
        return int(conn.execute("PRAGMA hard_heap_limit").fetchone()[0])


def _set(limit: int) -> int:
    # The pragma can only lower the limit (SQL must not raise it); a second pool raises it.
    if _SET is not None:
        _SET(limit)
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(f"PRAGMA hard_heap_limit = {int(limit)}")
        return int(conn.execute("PRAGMA hard_heap_limit").fetchone()[0])


def _apply(*, first: bool = False) -> int:
    """Under `_lock`: the limit for the pools now counted, unless the application set its own."""
    current, wanted = _current(), heap_limit()
    if first and current == 0:
        _held.ours = current  # no limit before the first pool: mcpkit keeps it from now on
        _held.soft = _soft()
    elif first or (_held.ours is not None and current != _held.ours):
        log.warning(
            "SQLite's heap limit is %d bytes, set by the application: mcpkit leaves it as it is "
            "(its pools would set %d); calls meet that limit instead",
            current,
            wanted,
        )
        _held.ours = None
    if _held.ours is None:
        return current
    if not _shares:  # the last pool went: no limit, as before the first
        _held.ours = None
        none = _set(0)
        _soft(_held.soft)
        return none
    applied = _held.ours = _set(wanted)
    if applied != wanted:
        log.warning("SQLite's heap limit is %d bytes, not the %d the pools need", applied, wanted)
    return applied
