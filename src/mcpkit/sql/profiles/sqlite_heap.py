"""One bound on all of SQLite's memory in this process: `PRAGMA hard_heap_limit`.

SQLITE_LIMIT_LENGTH bounds one value, not a call: a subquery's row holds all its columns at once
and a window buffers its partition (one call reached 1.2 GB with twelve 32 MB columns). SQLite has
no per-connection memory limit, only the process-wide hard heap limit: past it every allocation
fails, the statement ends with SQLITE_NOMEM (Python's `MemoryError`, a `resource` failure) and
frees what it held. The limit is what every SQLite source's pool may need (per connection: one
call's share and its page cache), plus `RESERVE` for the audit store and the bounded functions'
private connections, and at most `CEILING`; while no pool is alive there is none (SQLite's
default). It counts SQLite's allocations only, not Python's.
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

__all__ = ["CEILING", "PAGE_CACHE", "RESERVE", "heap_limit", "reserve"]

PAGE_CACHE: Final = 4 * 1024 * 1024
"""Per connection: its page cache (SQLite's default `cache_size` is 2,000 KiB), schema and statements."""
RESERVE: Final = 64 * 1024 * 1024
"""Outside the pools: the audit store, `sqlite_text`'s private connections, start-up checks."""
CEILING: Final = 1024 * 1024 * 1024
"""The limit never exceeds this, however many connections the pools hold."""

log = logging.getLogger("mcpkit.sql")
_lock = threading.Lock()
_shares: dict[int, int] = {}


def heap_limit() -> int:
    """The limit the live pools add up to; 0 (none, SQLite's default) while there is none."""
    with _lock:
        return min(CEILING, RESERVE + sum(_shares.values())) if _shares else 0


def reserve(owner: object, connections: int, per_call: int) -> int:
    """Count `owner`'s pool (at least one connection, each `per_call` plus its page cache) in the
    limit until `owner` is gone, and apply the limit now; returns it."""
    key = id(owner)
    with _lock:
        first = key not in _shares
        _shares[key] = max(connections, 1) * (per_call + PAGE_CACHE)
    if first:
        weakref.finalize(owner, _release, key)
    return _apply()


def _release(key: int) -> None:
    with _lock:
        _shares.pop(key, None)
    _apply()


def _c_setter() -> Callable[[int], int] | None:
    """SQLite's `sqlite3_hard_heap_limit64`, from the library the sqlite3 module uses (ctypes
    finds it through `_sqlite3`'s own dependencies); None where it is not exported."""
    try:
        setter = ctypes.CDLL(_sqlite3.__file__).sqlite3_hard_heap_limit64
    except (OSError, AttributeError):
        return None
    setter.restype = ctypes.c_int64
    setter.argtypes = [ctypes.c_int64]
    return cast(Callable[[int], int], setter)


_SET: Final = _c_setter()


def _apply() -> int:
    # The pragma can only lower the limit (SQL must not raise it); a second pool raises it.
    limit = heap_limit()
    if _SET is not None:
        _SET(limit)
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(f"PRAGMA hard_heap_limit = {int(limit)}")
        applied = int(conn.execute("PRAGMA hard_heap_limit").fetchone()[0])
    if applied != limit:
        log.warning("SQLite's heap limit is %d bytes, not the %d the pools need", applied, limit)
    return applied
