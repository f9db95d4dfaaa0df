"""PostgreSQL functions whose body reads the database's catalog (red team rt33b F3).

`pg_class.reltuples` / `relpages` of each partition of a table partitioned by a masked column (and
`pg_get_expr(relpartbound)`, its bounds) are shown to every role, whatever it may read: a function
answering them tells the column's histogram. `pg_stats` hides columns the reader cannot read, but
the catalog as a whole is no place to reason about per column. The agent's own queries cannot name
the catalog (admission), but a function it may call runs them as it. So each function the role may
execute whose body names the catalog (`pg_catalog`, `information_schema`, or any word beginning
`pg_`: every catalog relation, and the size and statistics functions, `pg_relation_size`,
`pg_stat_get_live_tuples`; unqualified ones resolve to the catalog first), or calls (by name) one
that does, counts. Fail closed: a body naming `pg_typeof` counts too (the opt-in lifts it).
C and internal functions have no body to read (the server's or an extension's own code), and an
SQL function of a reviewed extension (`routine_state.STATELESS_EXTENSIONS`) is contrib's own code.
Every function initdb did not create counts, one a superuser placed in pg_catalog too (rt35a F1).
Views, materialized views and row-level-security policies whose query reads a catalog relation
count as well (`postgres_catalog_stored`, rt35a F6): an invoker view reads it as the reader.
"""

from __future__ import annotations

import re
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.catalog_path import catalog_path
from mcpkit.sql.profiles.postgres.routine_state import REVIEWED, reviewed_params

__all__ = ["catalog_read", "postgres_catalog_routines", "postgres_catalog_stored"]

_FUNCTIONS: Final = (
    "SELECT n.nspname, p.proname,"
    " CASE WHEN p.prosqlbody IS NOT NULL THEN pg_get_functiondef(p.oid) ELSE p.prosrc END,"
    " has_function_privilege(p.oid, 'EXECUTE') AND p.prokind IN ('f', 'w', 'a')"
    " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang"
    " JOIN pg_roles o ON o.oid = p.proowner"
    " WHERE p.oid >= 16384"  # a superuser's function in pg_catalog too (rt35a F1)
    " AND l.lanname NOT IN ('c', 'internal')"
    f" AND NOT {REVIEWED} ORDER BY n.nspname, p.proname"  # citext's `SELECT pg_catalog.replace(...)`
)
_WORD: Final = re.compile(r"[A-Za-z_\u0080-\U0010ffff][\w$\u0080-\U0010ffff]*")
_READS: Final = "it reads the database's catalog"
_CATALOG: Final = re.compile(r"^(?:pg_.*|information_schema)$")


def catalog_read(body: str) -> str | None:
    """The first word of `body` naming the catalog (case-folded), or None.

    >>> catalog_read("SELECT reltuples FROM PG_CATALOG.pg_class WHERE relname = p")
    'pg_catalog'
    >>> catalog_read("SELECT label FROM products WHERE id = i") is None
    True
    """
    for match in _WORD.finditer(body):
        word = match.group().lower()
        if _CATALOG.match(word):
            return word
    return None


def postgres_catalog_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each function the role may execute ((schema, name) as stored) whose body reads the catalog,
    itself or through a function it calls (by name) -> why."""
    with catalog_path(conn):
        found = conn.execute(text(_FUNCTIONS), reviewed_params(conn)).all()
    rows = [(str(s), str(n), str(b or ""), bool(x)) for s, n, b, x in found]
    why: dict[str, str] = {}
    for _, name, body, _ in rows:
        read = catalog_read(body)
        if read is not None:
            why.setdefault(
                name.lower(), f"it reads the database's catalog ({read}), which describes masked columns"
            )
    changed = True
    while changed:  # a function calling one that reads the catalog reads it too
        changed = False
        for _, name, body, _ in rows:
            if name.lower() in why:
                continue
            words = {m.group().lower() for m in _WORD.finditer(body)}
            called = next((w for w in sorted(words) if w in why), None)
            if called is not None:
                why[name.lower()] = f"it calls {called}, which reads the database's catalog"
                changed = True
    return {(s, n): why[n.lower()] for s, n, _, usable in rows if usable and n.lower() in why}


# Each user view, materialized view and row-level-security policy whose stored query reads a catalog
# relation (oid < 16384: pg_catalog's tables and views, information_schema's views), itself or
# through another view: an invoker view over pg_class tells reltuples as a function does (rt35a F6).
_STORED: Final = r"""
WITH RECURSIVE rt(obj, relid) AS (
    SELECT r.ev_class, m[1]::oid FROM pg_catalog.pg_rewrite r,
           regexp_matches(r.ev_action::text, '[:]relid (\d+)', 'g') m
    WHERE r.ev_class >= 16384 AND m[1]::oid <> r.ev_class
), cat(obj, what) AS (
    SELECT rt.obj, k.nspname || '.' || c.relname FROM rt JOIN pg_catalog.pg_class c ON c.oid = rt.relid
    JOIN pg_catalog.pg_namespace k ON k.oid = c.relnamespace WHERE rt.relid < 16384
  UNION
    SELECT rt.obj, cat.what FROM rt JOIN cat ON cat.obj = rt.relid
)
SELECT CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, 'view', n.nspname, c.relname,
       min(cat.what)
FROM cat JOIN pg_catalog.pg_class c ON c.oid = cat.obj AND c.relkind IN ('v', 'm')
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE has_schema_privilege(n.oid, 'USAGE')
  AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))
GROUP BY 1, 2, 3, 4
UNION ALL
SELECT 'policy', 'policy', n.nspname, c.relname || '.' || p.polname, min(kn.nspname || '.' || k.relname)
FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
     regexp_matches(coalesce(p.polqual::text, '') || coalesce(p.polwithcheck::text, ''),
                    '[:]relid (\d+)', 'g') m
     JOIN pg_catalog.pg_class k ON k.oid = m[1]::oid AND k.oid < 16384
     JOIN pg_catalog.pg_namespace kn ON kn.oid = k.relnamespace
WHERE has_any_column_privilege(c.oid, 'SELECT')
GROUP BY 1, 2, 3, 4
ORDER BY 3, 4
"""


def postgres_catalog_stored(conn: Connection) -> dict[tuple[str, str, str], str]:
    """Each view, materialized view and policy the role may select (or that applies to a table it
    may select) whose query reads the catalog: (opt-in kind, schema, name) -> what it is, and why.
    A policy's name is TABLE.POLICY."""
    out = {}
    with catalog_path(conn):
        found = conn.execute(text(_STORED)).all()
    for what, kind, schema, name, read in found:
        out[(str(kind), str(schema), str(name))] = (
            f"{what} {schema}.{name} reads the database's catalog ({read}), which describes masked columns"
        )
    return out
