"""PostgreSQL: masked values the catalog holds, `pg_attribute.attmissingval`.

`ALTER TABLE ... ADD COLUMN c ... DEFAULT v` (any default that is not volatile) writes no row:
PostgreSQL stores `v` once in `pg_attribute.attmissingval` (`atthasmissing`) and reads it for
every row written before. `pg_attribute` is readable by every login, whatever its column
privileges, so for a masked column that value is readable past the grants that withhold it. It
stays until the table is rewritten: measured on PostgreSQL 15, `VACUUM FULL` and `CLUSTER` clear
it (so do `ALTER COLUMN ... TYPE`, `SET UNLOGGED` and `DROP COLUMN`), while an `UPDATE` of every
row, `VACUUM`, `TRUNCATE`, `DELETE`, and dropping or changing the default do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.catalog_path import on_path

__all__ = ["catalog_value_findings", "catalog_value_tables"]

# The masked table resolved as queries resolve it (see masks._COLUMNS), with its masked columns
# that hold a value for rows written before they were added.
_MISSING: Final = """
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), array_agg(a.attname ORDER BY a.attnum)
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))
  AND a.attname = ANY(:masked) AND a.atthasmissing
GROUP BY n.nspname, c.relname
"""


def catalog_value_tables(
    conn: Connection, masked: Mapping[str, frozenset[str]]
) -> list[tuple[str, list[str]]]:
    """Each masked table (qualified, quoted) whose catalog holds a value of masked columns, with those."""
    found = []
    for table, columns in sorted(masked.items()):
        row = conn.execute(text(_MISSING), {"table": on_path(conn, table), "masked": sorted(columns)}).first()
        if row is not None:
            found.append((str(row[0]), [str(c) for c in row[1]]))
    return found


def catalog_value_findings(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per masked table whose `pg_attribute.attmissingval` holds a masked value."""
    return [
        Finding(
            "masked-column-catalog-value",
            f"pg_attribute.attmissingval of {name} holds the value ADD COLUMN ... DEFAULT gave the rows "
            f"then present of masked column(s) {', '.join(columns)}; every login may read pg_attribute",
            f"VACUUM FULL {name} (rewrites the table, which clears it; an UPDATE of every row does not)",
        )
        for name, columns in catalog_value_tables(conn, masked)
    ]
