"""PostgreSQL user functions: each counts as a per-row one over masked reads (red teams rt29, rt31, rt32).

A function called once per row over a masked read, with an index (or CLUSTER) on the masked
column, can number the rows in the masked order: a STABLE SQL function counting with `set_config`
did (rt29 F2). Its label is only a claim, and three rounds of red teams (rt29, rt31, rt32) got a
counter past every proof of a body's statelessness (a parameter DEFAULT, `ifnull` rendered as
COALESCE, a user operator, a domain CHECK). So no body is read: every user function counts, and
only `--allow function-order:S.N` accepts one. An aggregate counts too (its transition function
sees the rows in scan order). A function of an extension a superuser owns, and a C or internal
function, is not user code: it counts by its VOLATILE label.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["PER_ROW", "postgres_row_order_routines"]

PER_ROW: Final = (
    "it is a user function, whose value may change from row to row (only --allow function-order:"
    " accepts one over masked reads)"
)
_USER: Final = """
SELECT n.nspname, p.proname
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
JOIN pg_catalog.pg_roles o ON o.oid = p.proowner
WHERE p.prokind IN ('f', 'w', 'a') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
  AND (p.provolatile = 'v' OR NOT (l.lanname IN ('c', 'internal') AND p.prokind <> 'a'
       OR o.rolsuper AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
           WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')))
"""


def postgres_row_order_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each user function (schema, name) whose calls may change from row to row, with why."""
    return {(str(s), str(n)): PER_ROW for s, n in conn.execute(text(_USER))}
