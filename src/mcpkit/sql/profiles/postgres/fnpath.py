"""SQL functions with a search_path of their own, and the catalog's per-row functions (red team rt27).

`CREATE FUNCTION f() ... SET search_path = x, s AS 'SELECT real FROM customers ORDER BY id'`
resolves the names of its string body with its own path when it runs: `customers` was an invoker
view `x.customers` whose `id` is a constant, while the stored-body order check (`masking.view_order`)
read the table `s.customers`, whose primary key `id` made the order look total (F2). So each name
of such a body is resolved here under the function's path and under the session's: a name that
resolves to another relation (or a path that puts a schema before pg_catalog, where a call may
be another function) makes the function unverifiable, refused at start-up unless its
`--allow function-order:` opt-in is given. A SQL-standard body (BEGIN ATOMIC, RETURN) and a view's
query are stored resolved: `pg_get_viewdef` and `pg_get_function_sqlbody` qualify a name the
session's path would resolve elsewhere.

`volatile_names`: the functions whose value may change from one row to the next in evaluation
order (F4: `clock_timestamp()` in a view numbered the rows in scan order): every VOLATILE one
(the default of CREATE FUNCTION), and every user function (`routine_state`: a SQL function declared
STABLE may still return `clock_timestamp()`, its volatility is only a claim).
"""

from __future__ import annotations

import re
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from mcpkit.sql.profiles.postgres.catalog_path import reader_schemas
from mcpkit.sql.profiles.postgres.routine_state import postgres_row_order_routines

__all__ = ["path_reason", "volatile_names"]

_ELEMENT: Final = re.compile(r'\s*(?:"(?P<quoted>(?:[^"]|"")*)"|(?P<plain>[^,]*?))\s*(?:,|$)')
# The relation each name resolves to along a path: the first schema in order that has one.
_RESOLVE: Final = """
SELECT DISTINCT ON (c.relname) c.relname, c.oid
FROM unnest(CAST(:path AS text[])) WITH ORDINALITY AS s(nspname, ord)
JOIN pg_catalog.pg_namespace n ON n.nspname = s.nspname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = ANY(CAST(:names AS text[]))
ORDER BY c.relname, s.ord
"""
_VOLATILE: Final = "SELECT DISTINCT lower(proname) FROM pg_catalog.pg_proc WHERE provolatile = 'v'"


def volatile_names(conn: Connection) -> frozenset[str]:
    """Lower-cased names of the functions whose value may change from row to row (see the module)."""
    users = postgres_row_order_routines(conn)
    return frozenset(str(n) for n in conn.execute(text(_VOLATILE)).scalars()) | {n.lower() for _, n in users}


def _schemas(setting: str, user: str) -> list[str]:
    """The schemas of a `search_path` value as PostgreSQL splits it (unquoted: lower case)."""
    out: list[str] = []
    for found in _ELEMENT.finditer(setting):
        if found.end() == found.start():
            break
        quoted, plain = found["quoted"], found["plain"]
        name = quoted.replace('""', '"') if quoted is not None else (plain or "").lower()
        if name:
            out.append(user if name == "$user" else name)
    return out


def _names(body: str) -> list[str]:
    """The unqualified relation names of a body, folded as PostgreSQL folds them."""
    try:
        trees = [t for t in sqlglot.parse(body, read="postgres") if t is not None]
    except (SqlglotError, RecursionError, ValueError):
        return []  # the order check reports a body it cannot parse
    found = {
        table.name
        for tree in trees
        for table in normalize_identifiers(tree, dialect="postgres").find_all(exp.Table)
        if isinstance(table.this, exp.Identifier) and not table.args.get("db")
    }
    return sorted(found)


def _resolved(conn: Connection, path: list[str], names: list[str]) -> dict[str, int]:
    rows = conn.execute(text(_RESOLVE), {"path": path, "names": names})
    return {str(name): int(oid) for name, oid in rows}


def path_reason(conn: Connection, body: str, setting: str, user: str) -> str | None:
    """Why a string body run under its own `search_path` value `setting` (`$user`: `user`) may
    read other relations than the check resolves with the session's path; None when each name
    resolves alike."""
    own = _schemas(setting, user)
    if "pg_catalog" not in own:
        own = ["pg_catalog", *own]
    if own[0] != "pg_catalog":
        return "its own search_path puts a schema before pg_catalog, so its calls cannot be checked"
    names = _names(body)
    if not names:
        return None
    session = reader_schemas(conn, implicit=True)
    if _resolved(conn, own, names) != _resolved(conn, session, names):
        return "its own search_path makes a name in its body another relation than this check reads"
    return None
