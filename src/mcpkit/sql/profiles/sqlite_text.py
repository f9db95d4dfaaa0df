"""SQLite's string searches, bounded: each runs in one VM step, where no progress handler runs.

SQLite's instr() and replace() compare the needle at every position of the haystack
(`instr(<30 MB of 'a'>, <100 KB of 'a'> || 'b')` is 3e12 byte compares, minutes past any
deadline), and LIKE/GLOB match a pattern the same way. instr and replace are replaced by
Python's, whose search is linear in the haystack for long needles (two-way); LIKE and GLOB keep
SQLite's own, with the pattern capped at `LIKE_PATTERN_LENGTH` bytes, so one comparison costs at
most MAX_LENGTH * LIKE_PATTERN_LENGTH steps (2e9: about 2 s). trim(), ltrim() and rtrim() with a
character set compare each character they remove with every character of the set
(`ltrim(<120,000 'a'>, <120,000 'b'> || 'a')` ran 21 s in one step); theirs are replaced by
Python's, linear in both for long sets.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Any, Final

__all__ = ["LIKE_PATTERN_LENGTH", "bound_text_functions"]

LIKE_PATTERN_LENGTH: Final = 64
"""SQLITE_LIMIT_LIKE_PATTERN_LENGTH for calls (SQLite's default is 50,000 bytes)."""
# The most a call to the built-in may compare when the arguments are not plain text or blobs.
_BUDGET: Final = 10**9

_local = threading.local()


def _builtin(name: str, args: tuple[Any, ...], max_length: int) -> Any:
    """SQLite's own function, on a private in-memory connection (one per thread)."""
    plain: sqlite3.Connection | None = getattr(_local, "conn", None)
    if plain is None:
        plain = sqlite3.connect(":memory:", check_same_thread=False)
        plain.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
        _local.conn = plain
    marks = ", ".join("?" * len(args))
    return plain.execute(f"SELECT {name}({marks})", args).fetchone()[0]


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes) else 32


_SHORT_SET: Final = 16  # a set this short costs str.strip at most 16 compares per character


def _trimmed(text: str, chars: str, left: bool, right: bool) -> str:
    if len(chars) <= _SHORT_SET:
        return text.strip(chars) if left and right else text.lstrip(chars) if left else text.rstrip(chars)
    leading = re.compile("[" + "".join(re.escape(c) for c in set(chars)) + "]*")
    start = leading.match(text).end() if left else 0  # type: ignore[union-attr]
    end = len(text) - leading.match(text[::-1]).end() if right else len(text)  # type: ignore[union-attr]
    return text[start : max(start, end)]


def _trim_function(name: str, left: bool, right: bool, max_length: int) -> Any:
    def trim(text: Any, chars: Any) -> Any:
        if text is None or chars is None:
            return None
        if isinstance(text, str) and isinstance(chars, str):
            return _trimmed(text, chars, left, right)
        if _size(text) * _size(chars) > _BUDGET:  # numbers and blobs keep SQLite's own text form
            raise ValueError(f"{name} over a value too big to search")
        return _builtin(name, (text, chars), max_length)

    return trim


def bound_text_functions(conn: sqlite3.Connection, max_length: int) -> None:
    """Install the bounded instr(), replace() and two-argument trims, and cap LIKE/GLOB patterns."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, LIKE_PATTERN_LENGTH)

    def instr(haystack: Any, needle: Any) -> Any:
        if haystack is None or needle is None:
            return None
        if type(haystack) is type(needle) and isinstance(haystack, str | bytes):
            return haystack.find(needle) + 1
        if _size(haystack) * _size(needle) > _BUDGET:
            raise ValueError("instr over a value too big to search")
        return _builtin("instr", (haystack, needle), max_length)

    def replace(text: Any, old: Any, new: Any) -> Any:
        if text is None or old is None or new is None:
            return None
        if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
            if _size(text) * _size(old) > _BUDGET:
                raise ValueError("replace over a value too big to search")
            return _builtin("replace", (text, old, new), max_length)
        if not old:
            return text
        # Checked before the result is built: a short pattern replaced by a long one multiplies.
        if len(text) + text.count(old) * (len(new) - len(old)) > max_length:
            raise ValueError("string or blob too big")
        out = text.replace(old, new)
        if len(out) * 4 > max_length and len(out.encode("utf-8", "surrogatepass")) > max_length:
            raise ValueError("string or blob too big")
        return out

    conn.create_function("instr", 2, instr, deterministic=True)
    conn.create_function("replace", 3, replace, deterministic=True)
    for name, left, right in (("trim", True, True), ("ltrim", True, False), ("rtrim", False, True)):
        conn.create_function(name, 2, _trim_function(name, left, right, max_length), deterministic=True)
