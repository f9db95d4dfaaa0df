"""Result descriptions an engine remembers between calls (`SqlEngine._run_clipped`).

A remembered description only ever saves a round trip: a call uses it after its own describe,
sent in the same pipeline, matched it (`mcpkit.sql.clipping.postgres.run`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["Remembered"]


class Remembered:
    """A small LRU of result descriptions by SQL text, shared by one engine's handler threads."""

    def __init__(self, size: int = 256, max_chars: int = 4096) -> None:
        self._size, self._max_chars = size, max_chars
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sql: str) -> Any:
        """The description remembered for `sql`, or None."""
        with self._lock:
            found = self._items.get(sql)
            if found is not None:
                self._items.move_to_end(sql)
            return found

    def put(self, sql: str, described: Any) -> None:
        """Remember `described` for `sql` (long statements are not kept)."""
        if len(sql) > self._max_chars:
            return
        with self._lock:
            self._items[sql] = described
            self._items.move_to_end(sql)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def pop(self, sql: str) -> None:
        """Forget `sql`'s description."""
        with self._lock:
            self._items.pop(sql, None)
