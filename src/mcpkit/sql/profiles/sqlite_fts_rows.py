"""A full-text query whose passes over the largest row would overrun the call is not started.

FTS3/4 and FTS5 evaluate a query for a row inside one VM step, out of the progress handler's and
`sqlite3_interrupt`'s reach. Admission bounds the passes a query makes over a row's term positions
(`admission.bound_fts_queries.fts_work`, at most 128); how many positions a row holds is data (red
team rtf F4: FTS4's `a NEAR/10 a ...` of 10 phrases over one 5,000,000-token row ran 7.3 s in one
step, FTS5's `NEAR(a a ... a, 10)` 6.2 s; the NEAR distance changes nothing). Before the statement
runs, `check_fts_rows` sums the passes of its full-text operands, reads the most tokens any row of a
full-text table holds (the `%_docsize` shadow table; without one the content's characters, a token
at most each; without content the longest values SQLite reads), and answers `interrupted` (a
timeout, as the bounded functions do) when passes x tokens at `RATE` would end more than a second
past the deadline. The row sizes are read on a read-only connection of their own (under the call's
deadline) and kept per database file until it changes; tables the masks withhold are skipped.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote

import sqlglot
from sqlglot import exp

from mcpkit.sql.admission.bound_fts_queries import fts_work
from mcpkit.sql.profiles.sqlite_deadline import expire_call, overruns, past_deadline

__all__ = ["RATE", "check_fts_rows", "fts_tables", "largest_row", "query_work"]

RATE: Final = 4e7
"""Passes x positions a second, low: FTS4's NEAR chain ran 13-21 ns each, FTS5's 11 ns, a single word
over FTS4 28 ns (its doclist read whole), on a 2-core VM."""
_FTS: Final = re.compile(r"\busing\s+fts([345])\b", re.IGNORECASE)
_MAX_VALUE: Final = 32 * 1024 * 1024  # SQLITE_LIMIT_LENGTH (`sqlite.MAX_LENGTH`): characters a value holds
_SMALL: Final = 16383  # a column's tokens in a 2-byte varint: a size blob of `columns + 1` bytes at most
_OPERANDS: Final = (exp.EQ, exp.NEQ, exp.Is, exp.NullSafeEQ, exp.Match, exp.In)
_cache: dict[tuple[object, ...], dict[str, int]] = {}
_cache_lock = threading.Lock()
_CACHED: Final = 64


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def fts_tables(conn: sqlite3.Connection) -> dict[str, int]:
    """The database's full-text tables, case-folded, by FTS version (3 for FTS3/4, 5); views by 0."""
    rows = conn.execute("SELECT type, name, sql FROM main.sqlite_master WHERE rootpage = 0")
    found: dict[str, int] = {}
    for kind, name, sql in rows.fetchall():
        match = _FTS.search(sql or "") if kind == "table" else None
        if match:
            found[str(name).casefold()] = 5 if match.group(1) == "5" else 3
        elif kind == "view":
            found[str(name).casefold()] = 0
    return found if any(found.values()) else {}


def _named(tree: exp.Expr, tables: dict[str, int]) -> dict[str, int]:
    """The full-text tables `tree` may read: those it names, every one where it names a view."""
    names: set[str] = set()
    for table in tree.find_all(exp.Table):
        call = table.this
        names |= {table.name.casefold(), call.name.casefold() if isinstance(call, exp.Anonymous) else ""}
    if any(tables.get(n) == 0 for n in names):
        names = set(tables)
    return {n: v for n, v in tables.items() if n in names and v}


def _varints(blob: bytes, fts5: bool) -> Iterable[int]:
    """FTS3/4's varints (7 bits a byte, low first) or FTS5's (SQLite's, high first)."""
    value, shift = 0, 0
    for byte in blob:
        if fts5:
            value = (value << 7) | (byte & 0x7F)
        else:
            value |= (byte & 0x7F) << shift
            shift += 7
        if not byte & 0x80:
            yield value
            value, shift = 0, 0


def _row_tokens(conn: sqlite3.Connection, name: str, version: int, shadows: set[str]) -> int:
    """The most tokens one row of the full-text table `name` holds (an upper bound)."""
    columns = max(1, len(conn.execute(f"PRAGMA table_info({_quote(name)})").fetchall()))
    docsize = f"{name}_docsize"
    if docsize.casefold() in shadows:
        size = "sz" if version == 5 else "size"
        most = _SMALL + 127 * columns  # any row the scan below passes over
        scan = f"SELECT {size} FROM {_quote(docsize)} WHERE length({size}) > ?"
        for (blob,) in conn.execute(scan, (columns + 1,)):
            if isinstance(blob, bytes):
                most = max(most, sum(_varints(blob, version == 5)))
        return most
    content = f"{name}_content"
    if content.casefold() in shadows:  # a token is a character at least
        names = [str(r[1]) for r in conn.execute(f"PRAGMA table_info({_quote(content)})").fetchall()[1:]]
        total = " + ".join(f"coalesce(length({_quote(c)}), 0)" for c in names) or "0"
        (most,) = conn.execute(f"SELECT max({total}) FROM {_quote(content)}").fetchone()
        return int(most or 0)
    return _MAX_VALUE * columns


def _file(conn: sqlite3.Connection) -> tuple[str, tuple[object, ...] | None]:
    """The main file's path, and its state with its write-ahead log's: the row sizes hold while it stays."""
    path = next((str(r[2]) for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    if not path:
        return path, None
    key: list[object] = [path]
    for name in (path, f"{path}-wal"):
        try:
            st = os.stat(name)
        except OSError:
            key.append(None)
            continue
        key.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return path, tuple(key)


def _reader(path: str) -> sqlite3.Connection:
    """The file opened read-only on a connection of its own (no authorizer or function policy to
    meet, nothing of the call's connection touched), stopped at the call's deadline."""
    reader = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, cached_statements=0)
    reader.execute("PRAGMA query_only = 1")
    reader.set_progress_handler(lambda: 1 if past_deadline() else 0, 1000)
    return reader


def largest_row(conn: sqlite3.Connection, tables: dict[str, int], skip: frozenset[str] = frozenset()) -> int:
    """The most tokens one row of `tables` (`fts_tables`) holds, but those in `skip` (case-folded)."""
    wanted = {n: v for n, v in tables.items() if n not in skip and v}
    path, key = _file(conn)
    with _cache_lock:
        sizes = dict(_cache.get(key, {})) if key is not None else {}
    missing = [n for n in wanted if n not in sizes]
    if missing:
        reader = _reader(path) if path else conn  # a database in memory: read where it is
        try:
            shadows = {
                str(r[0]).casefold()
                for r in reader.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
            }
            for name in missing:
                sizes[name] = _row_tokens(reader, name, wanted[name], shadows)
        finally:
            if reader is not conn:
                reader.close()
        if key is not None:
            with _cache_lock:
                if len(_cache) >= _CACHED:
                    _cache.clear()
                _cache[key] = sizes
    return max((sizes[n] for n in wanted), default=0)


def _literal_work(value: exp.Expr | None) -> int:
    while isinstance(value, exp.Paren):
        value = value.this
    return fts_work(value.this) if isinstance(value, exp.Literal) and value.is_string else 0


def query_work(tree: exp.Expr, tables: Iterable[str]) -> int:
    """Passes the full-text operands of `tree` make: MATCH's right operand, the other side of a
    comparison with a column named as a full-text table, the arguments of such a table called."""
    names = set(tables)
    seen: set[int] = set()
    work = 0

    def add(value: exp.Expr | None) -> None:
        nonlocal work
        if value is not None and id(value) not in seen:
            seen.add(id(value))
            work += _literal_work(value)

    for match in tree.find_all(exp.Match):
        add(match.expression)
    for column in tree.find_all(exp.Column):
        parent = column.parent
        if column.name.casefold() not in names or not isinstance(parent, _OPERANDS):
            continue
        if isinstance(parent, exp.In):
            for value in parent.expressions if parent.this is column else [parent.this]:
                add(value)
        else:
            add(parent.expression if parent.this is column else parent.this)
    for table in tree.find_all(exp.Table):
        call = table.this
        called = call.name if isinstance(call, exp.Anonymous) else ""
        if isinstance(call, exp.Func) and {table.name.casefold(), called.casefold()} & names:
            for value in call.expressions if isinstance(call, exp.Anonymous) else call.args.values():
                add(value if isinstance(value, exp.Expr) else None)
    return work


def check_fts_rows(
    conn: sqlite3.Connection, sql: str, tree: exp.Expr | None, skip: frozenset[str] = frozenset()
) -> None:
    """Raise `sqlite3.OperationalError` ("interrupted": the call timed out) where the statement's
    full-text work over the largest row would end more than a second past the call's deadline.

    `tree`: admission's parse of `sql`, if at hand (a worker process parses `sql` itself)."""
    tables = fts_tables(conn)
    text = sql.casefold()
    if not any(n in text or n.replace('"', '""') in text for n in tables):
        return  # no full-text table, nor a view that may read one, is named
    if tree is None:
        try:
            tree = sqlglot.parse_one(sql, read="sqlite")
        except sqlglot.errors.SqlglotError:
            return  # admission parsed what it sent; SQLite refuses what it cannot read
    work = query_work(tree, (n for n, v in tables.items() if v))
    if not work:
        return
    tokens = largest_row(conn, _named(tree, tables), skip)
    if overruns(work * tokens / RATE):
        expire_call()
        raise sqlite3.OperationalError(
            f"interrupted: {work} full-text passes over a row of {tokens} tokens would overrun the deadline"
        )
