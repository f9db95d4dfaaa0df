"""One bound on all of SQLite's memory in this process: `PRAGMA hard_heap_limit`.

SQLITE_LIMIT_LENGTH bounds one value, not a call: a subquery's row holds all its columns at once
and a window buffers its partition (one call reached 1.2 GB with twelve 32 MB columns). SQLite has
no per-connection memory limit, only the process-wide hard heap limit: past it every allocation
fails, the statement ends with SQLITE_NOMEM (Python's `MemoryError`, a `resource` failure) and
frees what it held. The limit is what every SQLite source's pool may need (per connection: one
call's share and its page cache), plus `RESERVE` for the audit store and the bounded functions'
private connections, and at most `CEILING`. It counts SQLite's allocations only, not Python's.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from contextlib import closing
from typing import Final

__all__ = ["CEILING", "PAGE_CACHE", "RESERVE", "heap_limit", "reserve"]

PAGE_CACHE: Final = 4 * 1024 * 1024
"""Per connection: its page cache (SQLite's default `cache_size` is 2,000 KiB), schema and statements."""
RESERVE: Final = 64 * 1024 * 1024
"""Outside the pools: the audit store, `sqlite_text`'s private connections, start-up checks."""
CEILING: Final = 1024 * 1024 * 1024
"""The limit never exceeds this, however many connections the pools hold."""

_lock = threading.Lock()
_shares: dict[int, int] = {}


def heap_limit() -> int:
    """The limit the pools registered so far add up to."""
    with _lock:
        return min(CEILING, RESERVE + sum(_shares.values()))


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


def _apply() -> int:
    limit = heap_limit()
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(f"PRAGMA hard_heap_limit = {int(limit)}")
    return limit
