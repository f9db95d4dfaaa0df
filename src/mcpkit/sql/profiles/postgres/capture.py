"""User operators over the catalog's own types on the reader's search_path (a start-up finding).

An unqualified operator resolves on the session's path, where an exact match in any schema beats
pg_catalog's operator that needs a coercion (and, with pg_catalog listed after it, one of the same
types): a `public.=(oid, regclass)` or `public.>=(oid, integer)` answers every catalog query that
names it, a tool's or a user's. The checks read the catalog with pg_catalog alone on the path
(`catalog_path`), so these cannot change their answers; but no analyst database needs an operator
over oid, the reg* aliases, name, aclitem or "char" outside pg_catalog, and its only effect is to
change what queries of the catalog mean: it is refused, with the DROP that removes it.

So is an operator of a schema the reader's path lists before pg_catalog with the name and argument
types of one of pg_catalog's (red team rtA F3: `public.>(smallint, smallint)` over `int2lt`, path
`public, pg_catalog`): it answers in pg_catalog's place wherever the reader's session writes the
operator, SQLAlchemy's reflection (`attnum > 0::SMALLINT`, which masking now reads pinned) and any
tool or library reading the catalog on that session among them.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.catalog_path import reader_schemas

__all__ = ["CATALOG_TYPES", "capture_findings"]

CATALOG_TYPES: Final = (
    "oid", "regclass", "regproc", "regprocedure", "regoper", "regoperator", "regtype", "regnamespace",
    "regrole", "regconfig", "regdictionary", "regcollation", "name", "aclitem", '"char"', "xid", "xid8",
    "cid", "tid", "oidvector", "int2vector", "pg_node_tree",
)  # fmt: skip
# Read under `catalog_path` (`PostgresProfile.inspect`): unqualified names are pg_catalog's.
_OPERATORS: Final = f"""
SELECT n.nspname, o.oprname,
       CASE WHEN o.oprleft = 0 THEN 'NONE' ELSE format_type(o.oprleft, NULL) END,
       format_type(o.oprright, NULL)
FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
WHERE n.nspname <> 'pg_catalog' AND n.nspname = ANY(CAST(:path AS text[]))
  AND (o.oprleft = ANY(CAST(ARRAY[{", ".join(f"'{t}'" for t in CATALOG_TYPES)}] AS regtype[]))
    OR o.oprright = ANY(CAST(ARRAY[{", ".join(f"'{t}'" for t in CATALOG_TYPES)}] AS regtype[])))
ORDER BY 1, 2, 3, 4
"""
# Exact twins of pg_catalog's operators in the schemas the path lists before pg_catalog.
_TWINS: Final = """
SELECT n.nspname, o.oprname,
       CASE WHEN o.oprleft = 0 THEN 'NONE' ELSE format_type(o.oprleft, NULL) END,
       format_type(o.oprright, NULL)
FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
WHERE n.nspname = ANY(CAST(:before AS text[]))
  AND EXISTS (SELECT 1 FROM pg_operator b WHERE b.oprnamespace = CAST('pg_catalog' AS regnamespace)
              AND b.oprname = o.oprname AND b.oprleft = o.oprleft AND b.oprright = o.oprright)
ORDER BY 1, 2, 3, 4
"""


def capture_findings(conn: Connection) -> list[Finding]:
    """One finding per operator over a catalog type in a schema on the reader's search_path."""
    path = reader_schemas(conn, implicit=False)
    ahead = reader_schemas(conn, implicit=True)
    before = ahead[: ahead.index("pg_catalog")] if "pg_catalog" in ahead else ahead
    rows = {*conn.execute(text(_OPERATORS), {"path": path}), *conn.execute(text(_TWINS), {"before": before})}
    found = []
    for schema, name, left, right in sorted(rows):
        quoted = '"' + str(schema).replace('"', '""') + '"'
        found.append(
            Finding(
                "catalog-operator",
                f"operator {schema}.{name}({left}, {right}) over the catalog's own types, or named and typed"
                " like one of pg_catalog's ahead of it, is on the search_path: it can answer queries of"
                " the catalog in place of pg_catalog's",
                f"DROP OPERATOR {quoted}.{name} ({left}, {right}) (or REVOKE USAGE ON SCHEMA {quoted}"
                " from the role and take the schema off its search_path)",
            )
        )
    return found
