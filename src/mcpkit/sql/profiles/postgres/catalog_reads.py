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
"""

from __future__ import annotations

import re
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.routine_state import REVIEWED, reviewed_params

__all__ = ["catalog_read", "postgres_catalog_routines"]

_FUNCTIONS: Final = (
    "SELECT n.nspname, p.proname,"
    " CASE WHEN p.prosqlbody IS NOT NULL THEN pg_get_functiondef(p.oid) ELSE p.prosrc END,"
    " has_function_privilege(p.oid, 'EXECUTE') AND p.prokind IN ('f', 'w', 'a')"
    " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang"
    " JOIN pg_roles o ON o.oid = p.proowner"
    " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
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
    found = conn.execute(text(_FUNCTIONS), reviewed_params())
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
