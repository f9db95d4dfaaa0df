"""SQLite: describe with `LIMIT 0`; types are per cell, so each cell is clipped by its own type.

SQLite flattens the query into the wrapper around it, so a computed column is evaluated once per
reading of it: the wrapper's `typeof()`, `substr()` and `length()` ran a costly expression three
times, and held three copies of a large one to the end of the row (`substr(t, 1, 10)` of 30 MB
texts: 87 MB, red team rtC F12). Keeping the query apart (a co-routine or a materialised CTE) does
not help: each reading of a co-routine's column is a deep copy, and a materialised CTE holds every
row. So the wrapper reads each column exactly once, through one function, `mcpkit_clip(value,
chars)` (registered on every connection, `register`): text is cut to `chars` characters, a blob
becomes a small blob holding its size in decimal digits, anything else passes as is. Through
SQLite's C API (`sqlite_capi`) it reads the value in place; where that is not available, a Python
function does the same on a copy.
"""

from __future__ import annotations

import _sqlite3
import ctypes
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from sqlglot import exp

from mcpkit.sql.clipping import BinarySize, CellBudget, ClipPlan, WireColumn, text_chars
from mcpkit.sql.profiles import sqlite_capi

__all__ = ["CLIP", "FUNCTIONS", "describe", "register", "wrap"]

CLIP: Final = "mcpkit_clip"
# What mcpkit's own SQL calls: the authorizer admits these whatever the operator's function list
# (the wrapper's `mcpkit_clip`; `typeof`, `substr` and `length`, which it called before, stay admitted).
FUNCTIONS: Final = frozenset({CLIP, "typeof", "substr", "length"})

_TEXT: Final = 3
_BLOB: Final = 4
_TRANSIENT: Final = ctypes.c_void_p(-1)


def describe(dbapi: Any, sql: str, tree: exp.Expr | None = None) -> list[WireColumn]:
    """The result columns of `sql`, from the same query with `LIMIT 0` (SQLite stops at once)."""
    cur = dbapi.cursor()
    try:
        cur.execute(f"SELECT * FROM ({sql}) LIMIT 0")
        description = cur.description or ()
    finally:
        cur.close()
    names: list[str] = []
    for col in description:  # SQLite names a repeated column `id:1` in a subquery; show it as written
        name = str(col[0])
        base, colon, digits = name.rpartition(":")
        names.append(base if colon and digits.isdigit() and base in names else name)
    return [WireColumn(name, None, "other") for name in names]


def value_or_size(cells: Sequence[Any]) -> Any:
    """`mcpkit_clip`'s cell: a blob is the size of the value it stood for."""
    value = cells[0]
    return BinarySize(int(value)) if isinstance(value, bytes) else value


def wrap(sql: str, columns: list[WireColumn], rows: int, budget: CellBudget) -> ClipPlan:
    """`WITH q(c1, ...) AS (<sql>) SELECT mcpkit_clip(q.c1, chars), ... FROM q`."""
    chars = text_chars(budget.cell_bytes(rows, len(columns)))
    parts = ", ".join(f"{CLIP}(q.c{i}, {chars})" for i in range(len(columns)))
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    text = f"WITH q({names}) AS ({sql}) SELECT {parts} FROM q"
    return ClipPlan(text, tuple(columns), tuple(1 for _ in columns), tuple(value_or_size for _ in columns))


def _end(head: bytes, chars: int) -> int:
    """Bytes of `head` (UTF-8, perhaps cut) that hold its first `chars` characters."""
    if head.isascii():
        return min(len(head), chars)
    return len(head.decode("utf-8", "surrogateescape")[:chars].encode("utf-8", "surrogateescape"))


def _c_clip(api: dict[str, Any]) -> Any:
    kind, text = api["sqlite3_value_type"], api["sqlite3_value_text"]
    size, number = api["sqlite3_value_bytes"], api["sqlite3_value_int64"]
    same, result_text = api["sqlite3_result_value"], api["sqlite3_result_text64"]
    nomem = api["sqlite3_result_error_nomem"]
    result_blob = ctypes.CDLL(_sqlite3.__file__).sqlite3_result_blob64
    result_blob.restype = None
    result_blob.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p]

    def clip(ctx: int, argc: int, argv: Any) -> None:
        try:
            value, found = argv[0], kind(argv[0])
            if found == _BLOB:
                digits = str(size(value)).encode()
                result_blob(ctx, digits, len(digits), _TRANSIENT)
                return
            chars = number(argv[1])
            if found != _TEXT or size(value) <= chars:  # (a text's bytes: at least its characters)
                same(ctx, value)
                return
            at = text(value)
            if not at:
                raise MemoryError
            held = size(value)
            end = _end(ctypes.string_at(at, min(held, 4 * chars)), chars)
            if end >= held:
                same(ctx, value)
            else:
                result_text(ctx, at, end, _TRANSIENT, 1)
        except BaseException:  # a ctypes callback must not raise; only memory can fail here
            nomem(ctx)

    return clip


def _py_clip(value: Any, chars: int) -> Any:
    if isinstance(value, bytes):
        return str(len(value)).encode()
    return value[:chars] if isinstance(value, str) else value


def _body(_context: sqlite_capi.Context) -> None:  # pragma: no cover: `_c_clip` answers every call
    raise sqlite_capi.Fail(f"{CLIP}() failed")


def register(conn: sqlite3.Connection) -> None:
    """Give the connection just opened `mcpkit_clip` (through the C API where it can)."""
    db = sqlite_capi.handle(conn)
    if db is None:
        conn.create_function(CLIP, 2, _py_clip, deterministic=True)
        return
    sqlite_capi.create_function(db, CLIP, 2, _body, lambda _slow: _c_clip(sqlite_capi.api()))
