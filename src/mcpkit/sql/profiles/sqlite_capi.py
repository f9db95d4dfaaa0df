"""SQL functions registered through SQLite's C API (ctypes), reading their arguments in place.

Python's `create_function` decodes every TEXT argument to `str` before the function runs: up to 32
MiB of UTF-8 became a 132 MB object when one character was astral (PEP 393 stores every character
in 4 bytes), and the function's result a second one (red team rt15my F1). A function registered here
gets SQLite's own values: it reads the UTF-8 bytes it needs (`Value.read`), a window at a time, and
its result is SQLite memory (`sqlite3_malloc64`, under the heap limit) or a slice of an argument.

The connection's `sqlite3 *` comes from an auto-extension (SQLite calls it for every connection this
process opens; it notes the last one per thread) and must equal the one in the `sqlite3.Connection`
object; otherwise, or off CPython, `handle()` is None and the caller keeps Python's functions.
"""

from __future__ import annotations

import _sqlite3
import ctypes
import logging
import sqlite3
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["Context", "Fail", "TooBig", "Value", "api", "create_function", "handle", "view"]

log = logging.getLogger("mcpkit.sql")

SQLITE_NULL: Final = 5
SQLITE_BLOB: Final = 4
_UTF8: Final = 1
_DETERMINISTIC: Final = 0x800
_TRANSIENT: Final = ctypes.c_void_p(-1)

_P = ctypes.c_void_p
_PyBUF_READ: Final = 0x100
_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
_FUNC = ctypes.CFUNCTYPE(None, _P, ctypes.c_int, ctypes.POINTER(_P))
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, _P, _P, _P)


def _bind(lib: ctypes.CDLL) -> dict[str, Any]:
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "sqlite3_value_type": (ctypes.c_int, [_P]),
        "sqlite3_value_text": (_P, [_P]),
        "sqlite3_value_blob": (_P, [_P]),
        "sqlite3_value_bytes": (ctypes.c_int, [_P]),
        "sqlite3_value_int64": (ctypes.c_int64, [_P]),
        "sqlite3_value_dup": (_P, [_P]),
        "sqlite3_value_free": (None, [_P]),
        "sqlite3_result_int64": (None, [_P, ctypes.c_int64]),
        "sqlite3_result_value": (None, [_P, _P]),
        "sqlite3_result_text64": (None, [_P, _P, ctypes.c_uint64, _P, ctypes.c_ubyte]),
        "sqlite3_result_error": (None, [_P, ctypes.c_char_p, ctypes.c_int]),
        "sqlite3_result_error_toobig": (None, [_P]),
        "sqlite3_result_error_nomem": (None, [_P]),
        "sqlite3_malloc64": (_P, [ctypes.c_uint64]),
        "sqlite3_free": (None, [_P]),
        "sqlite3_auto_extension": (ctypes.c_int, [_P]),
        "sqlite3_prepare_v2": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P), _P]),
        "sqlite3_bind_text": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_int, _P]),
        "sqlite3_bind_blob64": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_uint64, _P]),
        "sqlite3_bind_value": (ctypes.c_int, [_P, ctypes.c_int, _P]),
        "sqlite3_bind_pointer": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_char_p, _P]),
        "sqlite3_step": (ctypes.c_int, [_P]),
        "sqlite3_column_value": (_P, [_P, ctypes.c_int]),
        "sqlite3_column_text": (_P, [_P, ctypes.c_int]),
        "sqlite3_result_text": (None, [_P, _P, ctypes.c_int, _P]),
        "sqlite3_reset": (ctypes.c_int, [_P]),
        "sqlite3_clear_bindings": (ctypes.c_int, [_P]),
        "sqlite3_finalize": (ctypes.c_int, [_P]),
        "sqlite3_errmsg": (ctypes.c_char_p, [_P]),
        "sqlite3_strlike": (ctypes.c_int, [_P, _P, ctypes.c_uint]),
        "sqlite3_strglob": (ctypes.c_int, [_P, _P]),
        "sqlite3_create_function_v2": (
            ctypes.c_int,
            [_P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, _P, _FUNC, _P, _P, _P],
        ),
    }
    out: dict[str, Any] = {}
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
        out[name] = fn
    return out


_local = threading.local()


def _opened(db: int | None, _err: int | None, _api: int | None) -> int:
    _local.db = db
    return 0


def _load() -> tuple[dict[str, Any], Any] | None:
    if sys.implementation.name != "cpython":
        return None
    try:
        api = _bind(ctypes.CDLL(_sqlite3.__file__))
    except (OSError, AttributeError):
        return None
    entry = _ENTRY(_opened)
    if api["sqlite3_auto_extension"](ctypes.cast(entry, _P)) != 0:
        return None
    return api, entry


_LOADED: Final = _load()
_API: Final[dict[str, Any]] = _LOADED[0] if _LOADED else {}
_FREE: Final = ctypes.cast(_API["sqlite3_free"], _P) if _API else None
# The callbacks SQLite holds pointers to: one per function body, for the life of the process.
_callbacks: dict[tuple[str, Callable[[Context], None]], Any] = {}


def api() -> dict[str, Any]:
    """The C functions bound here, by name (empty when `handle()` is always None)."""
    return _API


def handle(conn: sqlite3.Connection) -> int | None:
    """`conn`'s `sqlite3 *` when it is the connection last opened in this thread, else None."""
    if not _API:
        return None
    noted: int | None = getattr(_local, "db", None)
    # CPython's pysqlite_Connection (3.8 to 3.13) starts with `sqlite3 *db` after PyObject_HEAD
    held = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if noted is None or held != noted:
        log.warning("SQLite's bounded text functions run in Python (no connection handle)")
        return None
    return noted


class Fail(Exception):
    """Ends a function with this SQLite error message."""


class TooBig(Exception):
    """Ends a function with SQLITE_TOOBIG ("string or blob too big"), as SQLite's own do."""


@dataclass(frozen=True)
class Value:
    """A value's bytes in SQLite's memory, valid for the function call."""

    ptr: int
    size: int

    def read(self, start: int, end: int) -> bytes:
        """A copy of bytes `start` to `end` (clipped to the value)."""
        end = min(end, self.size)
        return ctypes.string_at(self.ptr + start, end - start) if end > start else b""

    def view(self) -> memoryview:
        """The bytes in place, read-only and not copied: release it (`with`) before the call returns."""
        return memoryview(b"") if self.size == 0 else view(self.ptr, self.size)


def view(ptr: int, size: int) -> memoryview:
    """`size` bytes of SQLite's memory at `ptr`, read-only and not copied (format "B")."""
    out: memoryview = _memory_view(ptr, size, _PyBUF_READ)
    return out


class Context:
    """One call's arguments and result."""

    def __init__(self, ctx: int, argv: Any, argc: int) -> None:
        self.ctx = ctx
        self.args = [argv[i] for i in range(argc)]
        self.dups: list[int] = []

    def is_null(self, i: int) -> bool:
        return bool(_API["sqlite3_value_type"](self.args[i]) == SQLITE_NULL)

    def type(self, i: int) -> int:
        """Argument `i`'s type (`sqlite3_value_type`: 1 INTEGER, 2 FLOAT, 3 TEXT, 4 BLOB, 5 NULL)."""
        return int(_API["sqlite3_value_type"](self.args[i]))

    def int64(self, i: int) -> int:
        """Argument `i` as SQLite converts it to an integer (`sqlite3_value_int64`), in place."""
        return int(_API["sqlite3_value_int64"](self.args[i]))

    def is_blob(self, i: int) -> bool:
        return bool(_API["sqlite3_value_type"](self.args[i]) == SQLITE_BLOB)

    def text(self, i: int, copy: bool = False) -> Value | None:
        """Argument `i` as UTF-8 text (`sqlite3_value_text`), on a copy of the value when `copy`
        (SQLite's instr() reads a blob beside text that way, leaving the blob a blob)."""
        value = self.args[i]
        if copy:
            value = _API["sqlite3_value_dup"](value)
            if not value:
                raise MemoryError
            self.dups.append(value)
        ptr = _API["sqlite3_value_text"](value)
        return None if ptr is None else Value(ptr, _API["sqlite3_value_bytes"](value))

    def blob(self, i: int) -> Value:
        ptr = _API["sqlite3_value_blob"](self.args[i])
        return Value(ptr or 0, _API["sqlite3_value_bytes"](self.args[i]))

    def result_int(self, n: int) -> None:
        _API["sqlite3_result_int64"](self.ctx, n)

    def result_arg(self, i: int) -> None:
        """Argument `i` itself, its type kept."""
        _API["sqlite3_result_value"](self.ctx, self.args[i])

    def result_slice(self, value: Value, start: int, end: int) -> None:
        """Text: SQLite copies `value`'s bytes `start` to `end`."""
        _API["sqlite3_result_text64"](self.ctx, value.ptr + start, end - start, _TRANSIENT, _UTF8)

    def result_built(self, size: int, pieces: Callable[[], Any]) -> None:
        """Text of `size` bytes written from `pieces()` (bytes objects) into SQLite's memory."""
        buf = _API["sqlite3_malloc64"](size + 1)
        if not buf:
            raise MemoryError
        at = 0
        try:
            for piece in pieces():
                if at + len(piece) > size:
                    raise Fail("a bounded function built more than it measured")
                ctypes.memmove(buf + at, piece, len(piece))
                at += len(piece)
        except BaseException:
            _API["sqlite3_free"](buf)
            raise
        _API["sqlite3_result_text64"](self.ctx, buf, at, _FREE, _UTF8)

    def close(self) -> None:
        for value in self.dups:
            _API["sqlite3_value_free"](value)


def create_function(
    db: int,
    name: str,
    nargs: int,
    body: Callable[[Context], None],
    raw: Callable[[Callable[[int, int, Any], None]], Callable[[int, int, Any], None]] | None = None,
) -> None:
    """Register `body` as SQL function `name` on connection `db` (deterministic, UTF-8); pass the
    same `body` object for every connection (its callback is made once and kept).

    `raw(slow)`, when given, makes the function called with SQLite's own arguments (no `Context`:
    about 2 us a row less), which hands the call to `slow` (`body`'s) where it needs one."""
    callback = _callbacks.get((name, body))
    if callback is None:
        slow = _call(name, body)
        callback = _callbacks[(name, body)] = _FUNC(slow if raw is None else raw(slow))
    rc = _API["sqlite3_create_function_v2"](
        db, name.encode(), nargs, _UTF8 | _DETERMINISTIC, None, callback, None, None, None
    )
    if rc != 0:
        raise sqlite3.OperationalError(f"could not register {name}(): SQLite error {rc}")


def _call(name: str, body: Callable[[Context], None]) -> Callable[[int, int, Any], None]:

    def call(ctx: int, argc: int, argv: Any) -> None:
        context = Context(ctx, argv, argc)
        try:
            body(context)
        except TooBig:
            _API["sqlite3_result_error_toobig"](ctx)
        except MemoryError:
            _API["sqlite3_result_error_nomem"](ctx)
        except Exception as exc:  # a ctypes callback must not raise
            message = str(exc) if isinstance(exc, Fail) else f"{name}() failed: {type(exc).__name__}"
            _API["sqlite3_result_error"](ctx, message.encode(), -1)
        finally:
            context.close()

    return call
