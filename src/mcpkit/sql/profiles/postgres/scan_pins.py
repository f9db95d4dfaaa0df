"""Where PostgreSQL's read order may follow a masked column, and how calls keep it off one.

PostgreSQL has no index hints. An index scan (and an index-only scan) returns rows in the index's
key order, so with an index over a masked column (key, INCLUDE, expression or predicate) the order
of a plain read may follow the masked values: masked calls turn both off in their transaction
(`PostgresSession.index_scans_off`), whatever the indexes at start-up: one created while serving
was scanned before (fix session fixd). The re-verification reads the CLUSTER flags again
(`scanpins.pins_check`). Bitmap heap scans stay: they read the heap in block order,
which follows the masked column only where the table was CLUSTERed on such an index (a start-up
finding, `--allow clustered-order:T`) or its rows were written in that order (a warning).

A function's own `SET` clause applies while it runs, over the call's: one the role can make run
that sets a planner method or cost (`SET enable_indexonlyscan = on`, `enable_seqscan = off`,
`seq_page_cost = 1e9`) read the masked table along the masked index inside the call (red team rtd
prep: `SELECT ... FROM h()` scanned `customers_score`), so it is refused at start-up while calls
go without index scans (`--allow function-config:S.F`). Views and the other functions are planned
under the call's settings (`tests/sql/test_sql_mask_rtd_scan_pins.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.postgres.catalog_path import on_path
from mcpkit.sql.profiles.postgres.fnconfig import config_findings

__all__ = ["MASKED_INDEXES", "postgres_scan_pins"]

# Every index of the table with the columns it reads: key and INCLUDE columns (indkey), and those
# its expressions and predicate read (pg_depend; every column for a whole-row reference, subid 0);
# pg_index and pg_depend are readable by any login.
MASKED_INDEXES: Final = """
SELECT i.relname, x.indisclustered, a.attname
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum > 0 AND (a.attnum = ANY (x.indkey)
  OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = x.indexrelid
    AND d.refclassid = 'pg_class'::regclass AND d.refobjid = x.indrelid
    AND (d.refobjsubid = a.attnum OR d.refobjsubid = 0 AND d.deptype IN ('a', 'n'))))
WHERE x.indrelid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))
ORDER BY 1, 3
"""
# The settings that choose a scan's access path: a function setting one for itself may reopen the
# index scans each call turns off.
_PLANNER: Final = """
SELECT lower(name) FROM pg_catalog.pg_settings
WHERE category IN ('Query Tuning / Planner Method Configuration', 'Query Tuning / Planner Cost Constants')
"""
_OVER: Final = "the call's scan order (no index scans where an index reads a masked column)"


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
    if masked:  # calls go without index scans whatever the indexes now: one may be created while serving
        planner = {str(name): _OVER for (name,) in conn.execute(text(_PLANNER))}
        findings += config_findings(conn, frozenset(), settings=planner)
    return indexed, findings
