"""FTS5's snippet(), highlight() and bm25() asked the call's deadline first: each runs in one VM step.

SQLite checks its progress handler and `sqlite3_interrupt` only at jump opcodes, and an FTS5
auxiliary function is one step per row. snippet() scores every instance of every phrase against
every other (`docs MATCH 't* OR o* OR ...'`, 36 phrases over a 20,000-word row: 53 s of CPU under a
2 s timeout, red team rt35c F1), highlight() rebuilds its whole result at each match (400,000
matches in a 800 KB row: 9.5 s), and the instance list all three read costs phrases x instances
(bm25 with 100 phrases over a 100,000-token row: 2.4 s). Each is replaced, per connection, by a
wrapper that reads the sizes FTS5 knows in constant time (phrases, tokens, rows, then instances and
the column's bytes), estimates the work at rates measured low on a 2-core VM, and refuses as a
timeout (`interrupted`) to start work that would end more than a second past the deadline, as
like() does; otherwise it calls FTS5's own function. FTS5 keeps no pointer to its built-ins a caller
may ask for, so they are read from its list of auxiliary functions, checked link by link (the
connection, each entry's owner, the names); where that fails the three refuse instead.
"""

from __future__ import annotations

import ctypes
import logging
import re
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final

from mcpkit.sql.profiles.sqlite_capi import api, handle
from mcpkit.sql.profiles.sqlite_deadline import expire_call, overruns, past_deadline

__all__ = ["AUXILIARIES", "bound_fts5", "holds_fts3"]

log = logging.getLogger("mcpkit.sql")

AUXILIARIES: Final = ("bm25", "highlight", "snippet")
_FTS3: Final = re.compile(r"\busing\s+fts[34]\b", re.IGNORECASE)
_P = ctypes.c_void_p
_INT = ctypes.POINTER(ctypes.c_int)
_AUX = ctypes.CFUNCTYPE(None, _P, _P, _P, ctypes.c_int, ctypes.POINTER(_P))
_CREATE = ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.c_char_p, _P, _AUX, _P)
_COUNT = ctypes.CFUNCTYPE(ctypes.c_int, _P)
_COUNT_INTO = ctypes.CFUNCTYPE(ctypes.c_int, _P, _INT)
_ROWS = ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.POINTER(ctypes.c_int64))
_SIZE = ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.c_int, _INT)
_TOTAL = ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.c_int, ctypes.POINTER(ctypes.c_int64))
_TEXT = ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.c_int, ctypes.POINTER(_P), _INT)
# Slots of fts5.h's Fts5ExtensionApi (public and append-only): iVersion, xUserData, xColumnCount, ...
_SLOTS: Final = {"columns": 2, "rows": 3, "total": 4, "phrases": 6, "insts": 8, "text": 11, "size": 12}
_API_FUNCTIONS: Final = {2: 3, 3: 5}  # fts5_api's function pointers by iVersion (3: the _v2 tokenizers)
# Steps per second, low: instance pairs of snippet (I x (2I + T) ran 5-7e8/s), phrase x instance of
# the instance list (4e8/s) and phrase x row of bm25's first call; bytes highlight copies (5-9e10/s).
_RATE: Final = 2.5e8
_COPY_RATE: Final = 2e10


class _Ext:
    """The Fts5ExtensionApi functions the estimates read."""

    def __init__(self, address: int) -> None:
        slots = [int(slot or 0) for slot in (_P * 13).from_address(address)]
        self.columns = _COUNT(slots[_SLOTS["columns"]])
        self.rows = _ROWS(slots[_SLOTS["rows"]])
        self.total = _TOTAL(slots[_SLOTS["total"]])
        self.phrases = _COUNT(slots[_SLOTS["phrases"]])
        self.insts = _COUNT_INTO(slots[_SLOTS["insts"]])
        self.text = _TEXT(slots[_SLOTS["text"]])
        self.size = _SIZE(slots[_SLOTS["size"]])

    def tokens(self, fts: int) -> int:
        """Tokens of this row; where FTS5 cannot say (`columnsize=0` without content: 0 or an error),
        the whole table's, which no row exceeds (red team v3 F5)."""
        n = ctypes.c_int(0)
        if self.size(fts, -1, ctypes.byref(n)) == 0 and n.value > 0:
            return n.value
        total = ctypes.c_int64(0)
        if self.total(fts, -1, ctypes.byref(total)) != 0:
            raise RuntimeError("FTS5 gave no token count")
        return total.value

    def bytes_of(self, fts: int, column: int) -> int:
        """Bytes of `column` (every column's when it is negative) in this row."""
        columns = range(self.columns(fts)) if column < 0 else (column,)
        total, ptr, n = 0, _P(), ctypes.c_int(0)
        for i in columns:
            if self.text(fts, i, ctypes.byref(ptr), ctypes.byref(n)) == 0:
                total += n.value
        return total


_exts: dict[int, _Ext] = {}
# Seconds of work before and after the instance list is built, by function: (ext, fts, args, phrases,
# tokens, instances) -> seconds; `instances` is -1 for the first estimate.
Estimate = Callable[[_Ext, int, list[int], int, int, int], float]


def _arg_bytes(args: list[int], i: int) -> int:
    return int(api()["sqlite3_value_bytes"](args[i])) if i < len(args) else 0


def _copies(instances: int, size: int, marks: int) -> float:
    """highlight()'s work: the result, `size` plus marks at each instance, rebuilt at each instance."""
    return (instances + 1) * (size + instances * marks) / _COPY_RATE


def _highlight(ext: _Ext, fts: int, args: list[int], _phrases: int, _tokens: int, insts: int) -> float:
    if insts < 0 or len(args) != 3:
        return 0.0
    column = int(api()["sqlite3_value_int64"](args[0]))
    return _copies(insts, ext.bytes_of(fts, column), _arg_bytes(args, 1) + _arg_bytes(args, 2))


def _snippet(ext: _Ext, fts: int, args: list[int], _phrases: int, tokens: int, insts: int) -> float:
    if insts < 0 or len(args) != 5:
        return 0.0
    column = int(api()["sqlite3_value_int64"](args[0]))
    marks = _arg_bytes(args, 1) + _arg_bytes(args, 2) + 2 * _arg_bytes(args, 3)
    # each instance scored against every instance, and against the sentence starts before it
    return insts * (2 * insts + tokens) / _RATE + _copies(insts, ext.bytes_of(fts, column), marks)


def _bm25(ext: _Ext, fts: int, _args: list[int], phrases: int, _tokens: int, insts: int) -> float:
    if insts >= 0:
        return 0.0
    rows = ctypes.c_int64(0)
    ext.rows(fts, ctypes.byref(rows))
    return phrases * rows.value / _RATE  # its first row counts each phrase's rows in the table


_ESTIMATES: Final[dict[str, Estimate]] = {"bm25": _bm25, "highlight": _highlight, "snippet": _snippet}


def _wrapper(name: str, original: int) -> Any:
    run = _AUX(original)
    estimate = _ESTIMATES[name]
    calls = api()

    def refuse(ctx: int, message: bytes) -> None:
        calls["sqlite3_result_error"](ctx, message, -1)
        if message == b"interrupted":
            expire_call()  # ORDER BY rank reports any error of its function as "SQL logic error"

    def bounded(p_api: int, fts: int, ctx: int, argc: int, argv: Any) -> None:
        try:
            ext = _exts.get(p_api) or _exts.setdefault(p_api, _Ext(p_api))
            args = [argv[i] for i in range(argc)]
            phrases, tokens = ext.phrases(fts), ext.tokens(fts)
            # the instance list: each instance found among all phrases; a phrase matches once a token
            first = phrases * phrases * tokens / _RATE + estimate(ext, fts, args, phrases, tokens, -1)
            if past_deadline() or overruns(first):
                refuse(ctx, b"interrupted")
                return
            insts = ctypes.c_int(0)
            if ext.insts(fts, ctypes.byref(insts)) == 0 and overruns(
                estimate(ext, fts, args, phrases, tokens, insts.value)
            ):
                refuse(ctx, b"interrupted")
                return
        except Exception:  # a ctypes callback must not raise
            log.exception("FTS5 %s() bound failed", name)
            refuse(ctx, f"{name}() failed".encode())
            return
        run(p_api, fts, ctx, argc, argv)

    return _AUX(bounded)


def _refusing(name: str) -> Any:
    message = f"{name}() is unavailable: this SQLite's FTS5 could not be bounded".encode()

    def refuse(_api: int, _fts: int, ctx: int, _argc: int, _argv: Any) -> None:
        api()["sqlite3_result_error"](ctx, message, -1)

    return _AUX(refuse)


# The callbacks FTS5 holds pointers to, for the life of the process, by (name, original).
_callbacks: dict[tuple[str, int], Any] = {}
_made = threading.Lock()


def _fts5_api(db: int) -> int | None:
    """The connection's `fts5_api *` (SQLite's documented `SELECT fts5(?1)`), None without FTS5."""
    calls = api()
    stmt = _P()
    if calls["sqlite3_prepare_v2"](db, b"SELECT fts5(?1)", -1, ctypes.byref(stmt), None) != 0:
        return None
    out = _P()
    try:
        calls["sqlite3_bind_pointer"](stmt, 1, ctypes.byref(out), b"fts5_api_ptr", None)
        calls["sqlite3_step"](stmt)
    finally:
        calls["sqlite3_finalize"](stmt)
    return out.value


def _originals(fts5: int, db: int) -> dict[str, int] | None:
    """FTS5's own xFunc of each auxiliary function, from its list (struct Fts5Global, Fts5Auxiliary)."""
    word = ctypes.sizeof(_P)
    functions = _API_FUNCTIONS.get(ctypes.c_int.from_address(fts5).value)
    if word != 8 or functions is None:
        return None
    base = fts5 + word * (1 + functions)  # after fts5_api: sqlite3 *db, i64 iNextId, Fts5Auxiliary *pAux
    if _P.from_address(base).value != db:
        return None
    found: dict[str, int] = {}
    entry = _P.from_address(base + 2 * word).value
    for _ in range(64):
        if not entry:
            break
        # pGlobal, zFunc, pUserData, xFunc, xDestroy, pNext
        owner, name, _data, function, _destroy, following = (_P * 6).from_address(entry)
        if owner != fts5 or not name or not function:
            return None
        found.setdefault(ctypes.string_at(name).decode("latin-1"), function)
        entry = following
    return found if all(name in found for name in AUXILIARIES) else None


def bound_fts5(conn: sqlite3.Connection) -> None:
    """Replace snippet(), highlight() and bm25() on `conn` by bounded ones (where FTS5 is compiled in)."""
    db = handle(conn)
    fts5 = None if db is None else _fts5_api(db)
    if db is None or fts5 is None:
        return
    originals = _originals(fts5, db)
    if originals is None:
        log.warning("SQLite's FTS5 snippet(), highlight() and bm25() are refused (no bound for this build)")
    create = _CREATE(int(_P.from_address(fts5 + 3 * ctypes.sizeof(_P)).value or 0))
    for name in AUXILIARIES:
        original = originals[name] if originals else 0
        with _made:  # pooled connections open on several threads; FTS5 keeps a pointer to the one kept
            callback = _callbacks.get((name, original))
            if callback is None:
                made = _wrapper(name, original) if original else _refusing(name)
                callback = _callbacks[(name, original)] = made
        if create(fts5, name.encode(), None, callback, None) != 0:
            raise RuntimeError(f"could not bound FTS5 {name}()")


def holds_fts3(conn: sqlite3.Connection) -> bool:
    """Whether the database has an FTS3/4 table, whose snippet() no wrapper reaches (red team rtC F6:
    FTS4's snippet of 32 phrases over a 1,000,000-word row ran 11.7 s in one step, past a 2 s call).

    FTS3/4 give their snippet() to a call on their table through the virtual table, with no API to
    wrap it; where the database has such a table, snippet() is refused for the call (FTS5's too).
    """
    rows = conn.execute("SELECT sql FROM main.sqlite_master WHERE type = 'table' AND rootpage = 0")
    return any(_FTS3.search(sql or "") for (sql,) in rows.fetchall())
