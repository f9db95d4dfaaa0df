"""SQLite's text functions that run in one VM step, bounded: no progress handler runs inside a step.

SQLite's instr() and replace() compare the needle at every position of the haystack
(`instr(<30 MB of 'a'>, <100 KB of 'a'> || 'b')` is 3e12 byte compares, minutes past any
deadline), and LIKE/GLOB match a pattern the same way. instr and replace are replaced by
Python's, whose search is linear in the haystack for long needles (two-way). LIKE and GLOB keep
SQLite's own matcher (`sqlite3_strlike`/`sqlite3_strglob`), with the pattern capped at
`LIKE_PATTERN_LENGTH` bytes, so one comparison costs at most MAX_LENGTH * LIKE_PATTERN_LENGTH
steps (2e9: about 2 s), but through like()/glob() registered here, which ask the call's deadline
before each comparison and do not start one whose worst case would end more than about a second
past it: SQLite checks for an interrupt only at jumps, and ten LIKEs in one expression ran 18-25 s
past a 3 s deadline back to back (red team rt26 F2). trim(), ltrim() and rtrim() with a
character set compare each character they remove with every character of the set
(`ltrim(<120,000 'a'>, <120,000 'b'> || 'a')` ran 21 s in one step); theirs are replaced by
Python's, linear in both for long sets.

printf()/format() cost each spec its width plus its precision (SQLite 3.40's `%.*c` appends one
character per unit and notices the length limit only after: 2e9 is 6 s of CPU), so the sum over
all specs is held to the length limit (`bounded_printf`). Every built-in called from here runs on
a private in-memory connection per thread with the same length limit and a progress handler
bound to the call's deadline (`call_deadline`).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from mcpkit.sql.profiles import sqlite_search as search
from mcpkit.sql.profiles.sqlite_capi import (
    SQLITE_BLOB,
    Context,
    Fail,
    TooBig,
    Value,
    api,
    create_function,
    handle,
)
from mcpkit.sql.profiles.sqlite_deadline import call_deadline, overruns, past_deadline
from mcpkit.sql.profiles.sqlite_printf import spec_total
from mcpkit.sql.profiles.sqlite_printf_capi import c_printf

__all__ = ["LIKE_PATTERN_LENGTH", "bound_text_functions", "call_deadline", "past_deadline"]

LIKE_PATTERN_LENGTH: Final = 64
"""SQLITE_LIMIT_LIKE_PATTERN_LENGTH for calls (SQLite's default is 50,000 bytes)."""
# The most a call to the built-in may compare when the arguments are not plain text or blobs.
_BUDGET: Final = 10**9
_PROGRESS_STEPS: Final = 1  # a statement here is a few VM steps: checked before its function runs
# Pattern steps per second SQLite's matcher makes, low (32 MiB x 64 bytes took 2.3 s on a 2-core VM):
# a comparison whose worst case (value bytes x pattern bytes) passes the time left plus a second is
# not started.
_LIKE_RATE: Final = 10**9


def _blobs_match() -> bool:
    """Whether this SQLite's LIKE reads a blob as text (not built with SQLITE_LIKE_DOESNT_MATCH_BLOBS)."""
    conn = sqlite3.connect(":memory:")
    try:
        return bool(conn.execute("SELECT x'61' LIKE 'a'").fetchone()[0])
    finally:
        conn.close()


_BLOBS_MATCH: Final = _blobs_match()

_local = threading.local()


def _past_deadline() -> int:
    return 1 if past_deadline() else 0


def _private(max_length: int) -> sqlite3.Connection:
    """This thread's in-memory connection for SQLite's own functions."""
    plain: sqlite3.Connection | None = getattr(_local, "conn", None)
    if plain is None:
        # No statement cache: a cached statement keeps its last arguments (up to 32 MiB) in SQLite's heap.
        plain = sqlite3.connect(":memory:", check_same_thread=False, cached_statements=0)
        plain.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
        plain.set_progress_handler(_past_deadline, _PROGRESS_STEPS)
        _local.conn = plain
    return plain


def _builtin(name: str, args: tuple[Any, ...], max_length: int) -> Any:
    """SQLite's own function, on this thread's private connection."""
    marks = ", ".join("?" * len(args))
    return _row(f"SELECT {name}({marks})", args, max_length)[0]


def _row(sql: str, args: Sequence[Any], max_length: int) -> tuple[Any, ...]:
    cursor = _private(max_length).execute(sql, args)
    try:
        row: tuple[Any, ...] = cursor.fetchone()
        return row
    finally:
        cursor.close()  # frees the statement and the values it holds now, not at the next call


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes) else 32


_SHORT_SET: Final = 16  # a set this short costs str.strip at most 16 compares per character
_SET_SEARCH: Final = 10**7  # characters compared when the text's own characters are looked up
_SCAN_CHECK: Final = 0xFFFF  # a longer set's scan asks the call's deadline every 65,536 characters


def _trimmed(text: str, chars: str, left: bool, right: bool) -> str:
    if len(chars) <= _SHORT_SET:
        return text.strip(chars) if left and right else text.lstrip(chars) if left else text.rstrip(chars)
    # A set scan from each end: linear, nothing kept after the call (a regex per set cost seconds to
    # compile for a large set, in one VM step, and `re` cached each one: red team my11 F9).
    present = set(text)
    if len(present) * len(chars) <= _SET_SEARCH:  # a few searches of the set beat hashing all of it
        members = frozenset(c for c in present if c in chars)
    else:
        members = frozenset(chars)
    start, end = 0, len(text)
    while left and start < end and text[start] in members:
        start += 1
        if not start & _SCAN_CHECK and past_deadline():
            raise TimeoutError("trim ran past the call's deadline")
    while right and end > start and text[end - 1] in members:
        end -= 1
        if not end & _SCAN_CHECK and past_deadline():
            raise TimeoutError("trim ran past the call's deadline")
    return text[start:end]


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


def bounded_printf(max_length: int) -> Callable[..., Any]:
    """printf()/format() with the widths and precisions of all specs summing to at most `max_length`."""

    def as_int(values: list[Any]) -> list[int]:
        # SQLite's own conversion (sqlite3_value_int64, what printf's `*` reads): REAL, ' 2e9', ...
        out: list[int] = []
        for start in range(0, len(values), 500):
            chunk = values[start : start + 500]
            marks = ", ".join("printf('%d', ?)" for _ in chunk)
            out += [int(v) for v in _row(f"SELECT {marks}", chunk, max_length)]
        return out

    def printf(*args: Any) -> Any:
        fmt = args[0] if args else None
        fmt = fmt.encode("utf-8", "surrogatepass") if isinstance(fmt, str) else fmt
        if (
            isinstance(fmt, bytes)
            and spec_total(fmt, args[1:], as_int, max_length, past_deadline) > max_length
        ):
            raise ValueError("printf widths and precisions over the length limit")
        return _builtin("printf", args, max_length)

    return printf


def _check() -> None:
    if past_deadline():
        raise Fail("interrupted")  # what SQLite says at the progress handler: a timeout


def _check_steps(steps: int) -> None:
    """`_check`, and refuse to start `steps` of work that would end over a second past the deadline."""
    _check()
    if overruns(steps / _LIKE_RATE):
        raise Fail("interrupted")  # a timeout, as at the deadline itself


@functools.cache
def _c_like(glob: bool, max_length: int) -> Callable[[Context], None]:
    """SQLite's like()/glob() (their checks, errors and matcher), asking the deadline first."""
    name = "glob" if glob else "like"

    def like(c: Context) -> None:
        if not _BLOBS_MATCH and (c.is_blob(0) or c.is_blob(1)):
            c.result_int(0)
            return
        pattern = None if c.is_null(0) else c.text(0)
        if pattern is not None and pattern.size > LIKE_PATTERN_LENGTH:  # checked first, as SQLite does
            raise Fail("LIKE or GLOB pattern too complex")
        if any(c.is_null(i) for i in range(len(c.args))):
            return
        text = c.text(1)
        if pattern is None or text is None:
            raise MemoryError
        escape = 0
        if len(c.args) == 3:
            char = _one_char(c.text(2))
            if char is None or char in "%_":
                # SQLite's own errors and rules for these (`ESCAPE '%'`): on its private connection
                _check_steps(text.size * pattern.size)
                c.result_int(int(_builtin(name, tuple(_value(c, i) for i in range(3)), max_length)))
                return
            escape = ord(char)
        _check_steps(text.size * pattern.size)
        if glob:
            found = api()["sqlite3_strglob"](pattern.ptr, text.ptr)
        else:
            found = api()["sqlite3_strlike"](pattern.ptr, text.ptr, escape)
        c.result_int(1 if found == 0 else 0)

    return like


def _raw_like(glob: bool) -> Callable[[Callable[[int, int, Any], None]], Callable[[int, int, Any], None]]:
    """The common case of `_c_like` on SQLite's own arguments (two, a short pattern, time left):
    what it costs per row is the callback (about 2 us; SQLite's LIKE is 0.07 us)."""
    calls = api()
    text_of, size_of = calls["sqlite3_value_text"], calls["sqlite3_value_bytes"]
    result = calls["sqlite3_result_int64"]
    strglob, strlike = calls["sqlite3_strglob"], calls["sqlite3_strlike"]
    type_of = calls["sqlite3_value_type"]

    def with_slow(slow: Callable[[int, int, Any], None]) -> Callable[[int, int, Any], None]:
        def like(ctx: int, argc: int, argv: Any) -> None:
            if argc != 2 or size_of(argv[0]) > LIKE_PATTERN_LENGTH or past_deadline():
                slow(ctx, argc, argv)  # the errors, ESCAPE, and the deadline's refusal
                return
            if not _BLOBS_MATCH and (type_of(argv[0]) == SQLITE_BLOB or type_of(argv[1]) == SQLITE_BLOB):
                result(ctx, 0)
                return
            pattern, text = text_of(argv[0]), text_of(argv[1])
            if pattern is None or text is None:
                return  # NULL (or out of memory, as SQLite's own answers it)
            if size_of(argv[1]) * LIKE_PATTERN_LENGTH > _LIKE_RATE:
                slow(ctx, argc, argv)  # a long value: the worst case against the time left
                return
            found = strglob(pattern, text) if glob else strlike(pattern, text, 0)
            result(ctx, 1 if found == 0 else 0)

        return like

    return with_slow


def _one_char(value: Value | None) -> str | None:
    """The one character `value` holds (an ESCAPE), or None."""
    if value is None or not 0 < value.size <= 4:
        return None
    try:
        text = value.read(0, value.size).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if len(text) == 1 else None


def _value(c: Context, i: int) -> Any:
    """Argument `i` as text, for SQLite's own function on the private connection."""
    value = c.text(i)
    return None if value is None else value.read(0, value.size).decode("utf-8", "replace")


def _c_instr(c: Context) -> None:
    if c.is_null(0) or c.is_null(1):
        return
    _check()
    blobs = c.is_blob(0) and c.is_blob(1)
    if blobs:
        hay, needle = c.blob(0), c.blob(1)
    else:  # a blob beside text is read as text from a copy, as SQLite's instr() does
        mixed = c.is_blob(0) or c.is_blob(1)
        hay_text, needle_text = c.text(0, copy=mixed), c.text(1, copy=mixed)
        if hay_text is None or needle_text is None:
            raise MemoryError
        hay, needle = hay_text, needle_text
    with needle.view() as sought:  # not copied: a needle may be 32 MiB
        c.result_int(search.instr(hay.read, hay.size, sought, not blobs, _check))


@functools.cache
def _c_replace(max_length: int) -> Callable[[Context], None]:
    def replace(c: Context) -> None:
        if c.is_null(0) or c.is_null(1):
            return
        text, old = c.text(0), c.text(1)
        if text is None or old is None:
            raise MemoryError
        if old.size == 0 or old.read(0, 1) == b"\0":  # SQLite's test for an empty pattern
            c.result_arg(0)
            return
        new = None if c.is_null(2) else c.text(2)
        if new is None:
            return
        _check()
        with old.view() as pattern, new.view() as replacement:  # not copied: each may be 32 MiB
            windows, hits = search.replace_windows(text.read, text.size, pattern, _check)
            if not hits:
                c.result_slice(text, 0, text.size)
                return
            size = text.size + hits * (len(replacement) - len(pattern))
            if size > max_length:  # measured before anything is built
                raise TooBig
            c.result_built(size, lambda: search.replaced(text.read, windows, pattern, replacement, _check))

    return replace


@functools.cache
def _c_trim(name: str, left: bool, right: bool) -> Callable[[Context], None]:
    def trim(c: Context) -> None:
        if c.is_null(0) or c.is_null(1):
            return
        text, chars = c.text(0), c.text(1)
        if text is None or chars is None:
            raise MemoryError
        _check()
        try:
            start, end = search.trim_span(text.read, text.size, (chars.read, chars.size), left, right, _check)
        except search.Unsupported as exc:
            raise Fail(f"{name}() over {exc}") from None
        c.result_slice(text, start, end)

    return trim


def bound_text_functions(conn: sqlite3.Connection, max_length: int) -> None:
    """Install the bounded instr(), replace(), two-argument trims, printf() and format(); cap LIKE/GLOB.

    instr, replace and the trims read SQLite's bytes in place (`sqlite_capi`, `sqlite_search`); where
    that is not available, Python's versions below run on the arguments decoded to `str`."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, LIKE_PATTERN_LENGTH)
    db = handle(conn)
    if db is not None:
        for name in ("printf", "format"):
            create_function(db, name, -1, c_printf(max_length, past_deadline))
        create_function(db, "instr", 2, _c_instr)
        create_function(db, "like", 2, _c_like(False, max_length), _raw_like(False))
        create_function(db, "like", 3, _c_like(False, max_length))
        create_function(db, "glob", 2, _c_like(True, max_length), _raw_like(True))
        create_function(db, "replace", 3, _c_replace(max_length))
        for name, left, right in (("trim", True, True), ("ltrim", True, False), ("rtrim", False, True)):
            create_function(db, name, 2, _c_trim(name, left, right))
        return
    printf = bounded_printf(max_length)
    for name in ("printf", "format"):
        conn.create_function(name, -1, printf, deterministic=True)

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
