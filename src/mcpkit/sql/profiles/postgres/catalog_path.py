"""PostgreSQL catalog reads under `search_path = pg_catalog` (operator capture).

An unqualified operator resolves on the session's search_path, where PostgreSQL weighs operators of
other argument types alike whatever their schema: an exact match wins over pg_catalog's operator
that needs a coercion, though pg_catalog is searched first. A user `public.>=(oid, integer)` so
answered the start-up checks' `p.oid >= 16384`: it returning false made every user function the
server's own (no per-row function, no catalog finding, no implicit reach). Every catalog answer of
`PostgresProfile` is read with pg_catalog alone on the path (`catalog_path`, at the profile's
boundary), where no user operator, function or type is found; the reader's path comes back
afterwards. What the reader's names mean is still read on its own path, by queries holding no
operator and only qualified functions and types: `on_path` (a masked table's name, to its quoted
and qualified name) and `reader_schemas` (`current_schemas`). A query that fails leaves the
transaction to its rollback, which undoes the setting too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, Final, ParamSpec, TypeVar

from psycopg import pq
from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["VISIBLE", "catalog_path", "on_path", "pinned", "pinned_fetch", "reader_schemas"]

_PIN: Final = (
    "SELECT pg_catalog.current_setting('search_path'),"
    " pg_catalog.set_config('search_path', 'pg_catalog', false)"
)
_BACK: Final = "SELECT pg_catalog.set_config('search_path', CAST(:path AS pg_catalog.text), false)"
_READER: Final = "mcpkit.reader_path"  # `Connection.info` while pinned: the reader's own path
_NAMES: Final = "mcpkit.on_path"  # and what `on_path` resolved in the block
# No operator, every function and type qualified: nothing on the reader's path but the name itself
# can answer (`coalesce` and CAST are syntax; a cast between built-in types is the server's own).
_OID: Final = (
    "SELECT CAST(coalesce(pg_catalog.to_regclass(pg_catalog.quote_ident(CAST(:t AS pg_catalog.text))),"
    " pg_catalog.to_regclass(CAST(:t AS pg_catalog.text))) AS pg_catalog.oid)"
)
_QUALIFIED: Final = (
    "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = CAST(:oid AS oid)"
)
VISIBLE: Final = (
    "(c.relnamespace = (SELECT v.oid FROM unnest(CAST(:path AS text[])) WITH ORDINALITY AS s(nspname, ord)"
    " JOIN pg_catalog.pg_namespace v ON v.nspname = s.nspname JOIN pg_catalog.pg_class w"
    " ON w.relnamespace = v.oid AND w.relname = c.relname ORDER BY s.ord LIMIT 1))"
)
"""`pg_table_is_visible(c.oid)` on the reader's path, `:path` = `reader_schemas(implicit=True)`."""
_SCHEMAS: Final = "SELECT pg_catalog.unnest(pg_catalog.current_schemas({implicit}))"

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def catalog_path(conn: Connection) -> Iterator[None]:
    """Run the block's statements in `conn` with `search_path` pg_catalog alone, then restore it."""
    row = conn.execute(text(_PIN)).one()
    outer = _READER not in conn.info
    if outer:
        conn.info[_READER], conn.info[_NAMES] = str(row[0]), {}
    try:
        yield
    finally:
        if outer:
            conn.info.pop(_READER, None)
            conn.info.pop(_NAMES, None)
    conn.execute(text(_BACK), {"path": str(row[0])})


def pinned(method: Callable[P, R]) -> Callable[P, R]:
    """A profile method `(self, conn, ...)` run under `catalog_path(conn)`."""

    @wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with catalog_path(args[1]):  # type: ignore[arg-type]
            return method(*args, **kwargs)

    return run


@contextmanager
def _reader_path(conn: Connection) -> Iterator[None]:
    """The reader's own path for the block, inside `catalog_path` (else the path as it is)."""
    reader = conn.info.get(_READER)
    if reader is None:
        yield
        return
    conn.execute(text(_BACK), {"path": reader})
    yield
    conn.execute(text(_BACK), {"path": "pg_catalog"})


def on_path(conn: Connection, name: str) -> str:
    """`name` (a masked table's key) as the reader's path resolves it, quoted and qualified, which
    any path resolves alike; `name` itself where the reader's path finds no relation by it (no
    path that pg_catalog is on finds one then)."""
    known: dict[str, str] | None = conn.info.get(_NAMES)
    if known is not None and name in known:
        return known[name]
    with _reader_path(conn):
        oid = conn.execute(text(_OID), {"t": name}).scalar()
    if oid is None:
        return name
    with catalog_path(conn):
        found = conn.execute(text(_QUALIFIED), {"oid": int(oid)}).scalar()
    qualified = name if found is None else str(found)
    if known is not None:
        known[name] = qualified
    return qualified


def reader_schemas(conn: Connection, *, implicit: bool) -> list[str]:
    """`current_schemas(implicit)` on the reader's own path."""
    with _reader_path(conn):
        sql = _SCHEMAS.format(implicit="true" if implicit else "false")
        return [str(s) for s in conn.execute(text(sql)).scalars()]


def pinned_fetch(dbapi: Any, sql: str) -> list[tuple[Any, ...]]:
    """One statement's rows on the driver connection, read with pg_catalog alone on the path."""
    back = _BACK.replace(":path", "%s")
    cur = dbapi.cursor()
    try:
        cur.execute(_PIN)
        path = cur.fetchone()[0]
        try:
            cur.execute(sql)
            rows = [tuple(r) for r in cur.fetchall()]
        except Exception:
            # outside a transaction nothing undoes it; inside one (a call's BEGIN is sent in
            # autocommit mode) the rollback does, and any statement would fail with 25P02 in
            # place of the error itself (a timeout read as a failure)
            if dbapi.info.transaction_status == pq.TransactionStatus.IDLE:
                cur.execute(back, [path])
            raise
        cur.execute(back, [path])
        return rows
    finally:
        cur.close()
