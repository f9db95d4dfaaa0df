"""printf()/format() through SQLite's C API: widths checked on the format's bytes in place, then
SQLite's own printf run on the caller's values, nothing decoded to Python.

The Python function this replaces decoded every argument to `str` (4 bytes a character once one was
astral), got its result back as another `str` and encoded it again: `printf('%*s', 3e7, '😀')`
grew the process by 200 MB, four nested calls by 486 MB (red team 10, F2 second round). Here the
format is read as a view of SQLite's memory (`sqlite_printf.spec_sizes`), each `*` argument with
`sqlite3_value_int64` (what printf's `*` reads), and the built-in runs as a prepared
`SELECT printf(?1, ...)` on a private in-memory connection per thread whose parameters point at the
caller's values (SQLITE_STATIC: not copied); `sqlite3_result_value` copies its result into SQLite's
memory, under the heap limit. The private connection has the length limit; the call's deadline is
checked before its statement runs (printf is one VM step, its time bounded by the width check).
"""

from __future__ import annotations

import ctypes
import functools
import re
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final

from mcpkit.sql.profiles.sqlite_capi import Context, Fail, TooBig, api, handle, view
from mcpkit.sql.profiles.sqlite_printf import spec_total

__all__ = ["c_printf"]

_TEXT: Final = 3
_BLOB: Final = 4
_NULL: Final = 5
_UTF8: Final = 1
_ROW: Final = 100
_NOMEM: Final = 7
_INTERRUPT: Final = 9
_TOOBIG: Final = 18
_HANDOFF: Final = 1 << 20  # a result this long is handed to the caller's value, not copied
_NUL: Final = re.compile(b"\\0")

_local = threading.local()


class _Private:
    """This thread's in-memory connection for SQLite's own printf, and its statements by arity."""

    def __init__(self, max_length: int) -> None:
        # Autocommit: Python's default would leave the INSERT below in an open transaction, which a
        # later step that meets the heap limit rolls back, emptying `one` (every printf after it
        # answered no row: red team rt19lite F2).
        self.conn = sqlite3.connect(
            ":memory:", check_same_thread=False, cached_statements=0, isolation_level=None
        )
        db = handle(self.conn)  # the connection just opened in this thread
        if db is None:
            self.conn.close()
            raise Fail("printf() is not available")
        self.db = db
        self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_length)
        self.conn.execute("CREATE TABLE one (x)")
        self.conn.execute("INSERT INTO one VALUES (NULL)")
        self.statements: dict[int, int] = {}

    def statement(self, argc: int) -> int:
        stmt = self.statements.get(argc)
        if stmt is None:
            marks = "".join(f", ?{i}" for i in range(2, argc + 1))
            out = ctypes.c_void_p()
            # A constant call would be run once and its result copied into the row (OP_Copy): one
            # more copy of up to 32 MiB. `x` (NULL) makes it a call per row, into the row itself.
            sql = f"SELECT printf(coalesce(?1, x){marks}) FROM one".encode()
            if api()["sqlite3_prepare_v2"](self.db, sql, -1, ctypes.byref(out), None) != 0 or not out.value:
                raise Fail(self.error())
            stmt = self.statements[argc] = out.value
        return stmt

    def error(self) -> str:
        message: bytes | None = api()["sqlite3_errmsg"](self.db)
        return (message or b"printf() failed").decode("utf-8", "replace")

    def __del__(self) -> None:
        # Statements prepared through the C API are not Python's: finalized before the connection goes.
        for stmt in self.statements.values():
            api()["sqlite3_finalize"](stmt)
        self.statements = {}


# A handed-over result's address -> the private statement whose row holds it, finalized when SQLite
# frees the caller's value (maybe on another thread: SQLite serializes the private connection).
_held: dict[int, int] = {}
_held_lock = threading.Lock()


def _release(ptr: int | None) -> None:
    with _held_lock:
        stmt = _held.pop(ptr or 0, None)
    if stmt is not None:
        api()["sqlite3_finalize"](stmt)


_RELEASE: Final = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_release)
_RELEASE_PTR: Final = ctypes.cast(_RELEASE, ctypes.c_void_p)


def _hand_over(c: Context, private: _Private, argc: int, stmt: int) -> bool:
    """Make the row's text the function's result without a copy: the statement is kept (out of the
    cache) until SQLite releases the value. False for a short or non-text result (copied)."""
    calls = api()
    value = calls["sqlite3_column_value"](stmt, 0)
    size = int(calls["sqlite3_value_bytes"](value))
    if calls["sqlite3_value_type"](value) != _TEXT or size < _HANDOFF:
        return False
    ptr = calls["sqlite3_column_text"](stmt, 0)  # NUL-terminated in place
    if not ptr:
        raise MemoryError
    with view(ptr, size) as text:
        # Without a NUL inside, length -1 tells SQLite the text is terminated: reading it as text
        # later does not copy it to add one (printf's `%c` of '' writes a NUL).
        length = size if _NUL.search(text) else -1
    del private.statements[argc]
    calls["sqlite3_clear_bindings"](stmt)  # forgets the caller's values, keeps the row
    with _held_lock:
        _held[ptr] = stmt
    calls["sqlite3_result_text"](c.ctx, ptr, length, _RELEASE_PTR)
    return True


def _private(max_length: int) -> _Private:
    private: _Private | None = getattr(_local, "printf", None)
    if private is None:
        private = _local.printf = _Private(max_length)
    return private


def _sizes(c: Context, max_length: int, stop: Callable[[], bool]) -> int:
    """The sum of the widths and precisions `printf(*args)` will build, the format read in place."""
    kind = c.type(0)
    if kind not in (_TEXT, _BLOB):
        return 0  # a number's text has no `%`
    fmt = c.text(0) if kind == _TEXT else c.blob(0)
    if fmt is None:
        raise MemoryError
    try:
        with fmt.view() as text:
            stars = range(1, len(c.args))
            return spec_total(text, stars, lambda at: [c.int64(i) for i in at], max_length, stop)
    except TimeoutError:
        raise Fail("interrupted") from None  # what SQLite says at the progress handler: a timeout


def _bind(stmt: int, c: Context) -> None:
    calls = api()
    for i in range(len(c.args)):
        kind = c.type(i)
        if kind == _TEXT:
            text = c.text(i)
            if text is None:
                raise MemoryError
            # -1: SQLite finds the end (printf reads text up to its NUL) and knows it is terminated; with
            # a length it would copy the text to terminate it when printf reads it.
            rc = calls["sqlite3_bind_text"](stmt, i + 1, text.ptr, -1, None)
        elif kind == _BLOB and c.blob(i).size > 0:
            blob = c.blob(i)
            rc = calls["sqlite3_bind_blob64"](stmt, i + 1, blob.ptr, blob.size, None)
        else:  # numbers, NULL, an empty blob: copied, a few bytes
            rc = calls["sqlite3_bind_value"](stmt, i + 1, c.args[i])
        _raise(rc, "printf() could not read its arguments")


def _raise(rc: int, message: str) -> None:
    if rc == _TOOBIG:
        raise TooBig
    if rc == _NOMEM:
        raise MemoryError
    if rc == _INTERRUPT:
        raise Fail("interrupted")
    if rc != 0:
        raise Fail(message)


@functools.cache
def c_printf(max_length: int, stop: Callable[[], bool]) -> Callable[[Context], None]:
    """printf()/format() with the widths and precisions of all specs summing to at most `max_length`
    (SQLite 3.40's `%.*c` builds one character per unit before it notices the length limit)."""

    def printf(c: Context) -> None:
        if not c.args or c.type(0) == _NULL:
            return  # NULL, as SQLite's own
        if stop():
            raise Fail("interrupted")
        if _sizes(c, max_length, stop) > max_length:
            raise TooBig
        private = _private(max_length)
        stmt = private.statement(len(c.args))
        calls: dict[str, Any] = api()
        handed = False
        try:
            _bind(stmt, c)
            rc = calls["sqlite3_step"](stmt)
            if rc == _ROW:
                handed = _hand_over(c, private, len(c.args), stmt)
                if not handed:
                    calls["sqlite3_result_value"](c.ctx, calls["sqlite3_column_value"](stmt, 0))
                return
            _local.printf = None  # a failed step (heap limit, length): the next call starts afresh
            _raise(rc, private.error())
        finally:
            if not handed:
                # Frees the result and forgets the caller's values (the parameters point at them).
                calls["sqlite3_reset"](stmt)
                calls["sqlite3_clear_bindings"](stmt)

    return printf
