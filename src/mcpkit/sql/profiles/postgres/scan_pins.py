"""Where PostgreSQL's read order may follow a masked column, and how calls keep it off one.

PostgreSQL has no index hints. An index scan (and an index-only scan) returns rows in the index's
key order, so with an index over a masked column (key, INCLUDE, expression or predicate) the order
of a plain read may follow the masked values: calls then turn both off in their transaction
(`PostgresSession.index_scans_off`). Bitmap heap scans stay: they read the heap in block order,
which follows the masked column only where the table was CLUSTERed on such an index (a start-up
finding, `--allow clustered-order:T`) or its rows were written in that order (a warning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.postgres.catalog_path import on_path

__all__ = ["MASKED_INDEXES", "postgres_scan_pins"]

# Every index of the table with the columns it reads: key and INCLUDE columns (indkey), and those
# its expressions and predicate read (pg_depend); pg_index and pg_depend are readable by any login.
MASKED_INDEXES: Final = """
SELECT i.relname, x.indisclustered, a.attname
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum > 0 AND (a.attnum = ANY (x.indkey)
  OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = x.indexrelid
    AND d.refclassid = 'pg_class'::regclass AND d.refobjid = x.indrelid AND d.refobjsubid = a.attnum))
WHERE x.indrelid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))
ORDER BY 1, 3
"""


def postgres_scan_pins(conn: Connection, masked: Mapping[str, frozenset[str]]) -> tuple[bool, list[Finding]]:
    """Whether an index reads a masked column (calls then run without index scans), and a finding
    per table CLUSTERed on one."""
    indexed = False
    findings: list[Finding] = []
    for key, columns in sorted(masked.items()):
        wanted = {c.casefold() for c in columns}
        clustered: set[str] = set()
        for index, is_clustered, column in conn.execute(text(MASKED_INDEXES), {"table": on_path(conn, key)}):
            if str(column).casefold() in wanted:
                indexed = True
                if is_clustered:
                    clustered.add(str(index))
        for index in sorted(clustered):
            findings.append(
                Finding(
                    "clustered-masked",
                    f"table {key} is CLUSTERed on index {index} over a masked column, so its rows are "
                    "stored (and read) in that column's order",
                    f"CLUSTER {key} USING its primary key index (or one on visible columns)",
                    f"clustered-order:{key}",
                )
            )
    return indexed, findings
