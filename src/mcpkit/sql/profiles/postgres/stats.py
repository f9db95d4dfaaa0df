"""PostgreSQL's statistics for `profile_table`: `pg_stats`, which shows only what the role may read.

`pg_stats` lists a column only when the current role holds SELECT on it and row-level security is
not active on the table for that role (`has_column_privilege`, `row_security_active` in the view's
own definition), so most common values and bounds never come from rows or columns the role could
not select. The query states both conditions again, so a changed view cannot widen what is read.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import ColumnStats, TableStats
from mcpkit.sql.profiles.postgres.catalog_path import reader_schemas

__all__ = ["ROW_FILTERED", "ROW_FILTERED_NOTE", "postgres_table_stats"]

ROW_FILTERED: Final = "(c.relrowsecurity AND row_security_active(c.oid))"
"""Whether row-level security hides rows of `pg_class c` from the current role (not its owner,
not BYPASSRLS): then the catalog's whole-table counts are not the role's to see. The one test
`profile_table`, `list_tables` and `describe_table` apply."""
ROW_FILTERED_NOTE: Final = "not shown: row-level security"

_RELATION: Final = (
    f"SELECT c.oid, c.reltuples::bigint, {ROW_FILTERED}"
    " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = :schema AND c.relname = :table"
)
_READABLE: Final = (
    "SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = CAST(:oid AS oid) AND a.attnum > 0"
    " AND NOT a.attisdropped AND has_column_privilege(a.attrelid, a.attnum, 'SELECT')"
)
_STATS: Final = (
    "SELECT s.attname, s.null_frac, s.n_distinct, array_to_json(s.most_common_vals),"
    " s.most_common_freqs, array_to_json(s.histogram_bounds)"
    " FROM pg_catalog.pg_stats s WHERE s.schemaname = :schema AND s.tablename = :table"
    " AND has_column_privilege(CAST(:oid AS oid), s.attname, 'SELECT') ORDER BY s.inherited"
)


def _bounds(common: list[Any], histogram: list[Any]) -> tuple[Any, Any]:
    values = [v for v in [*common, *histogram] if v is not None and not isinstance(v, list | dict)]
    if not values:
        return None, None
    try:
        return min(values), max(values)
    except TypeError:  # mixed kinds: leave the bounds to the sample
        return None, None


def postgres_table_stats(conn: Connection, schema: str | None, table: str) -> TableStats:
    """The role-visible statistics of `schema.table` (nothing when RLS is active for the role)."""
    if schema is None:
        schema = next(iter(reader_schemas(conn, implicit=False)), "public")
    found = conn.execute(text(_RELATION), {"schema": schema, "table": table}).first()
    if found is None:
        return TableStats()
    oid, reltuples, rls_active = found
    readable = frozenset(str(r[0]) for r in conn.execute(text(_READABLE), {"oid": oid}))
    rows = int(reltuples) if reltuples is not None and reltuples >= 0 else None
    if rls_active:
        return TableStats(rows=rows, readable=readable, row_filtered=True)
    columns: dict[str, ColumnStats] = {}
    for name, null_frac, n_distinct, common, freqs, histogram in conn.execute(
        text(_STATS), {"schema": schema, "table": table, "oid": oid}
    ):
        if name in columns or name not in readable:
            continue  # the non-inherited row first; columns the role cannot select never
        distinct = None
        if n_distinct is not None:
            distinct = float(n_distinct) if n_distinct >= 0 else (-n_distinct * rows if rows else None)
        low, high = _bounds(list(common or []), list(histogram or []))
        columns[str(name)] = ColumnStats(
            null_fraction=float(null_frac) if null_frac is not None else None,
            distinct=distinct,
            minimum=low,
            maximum=high,
            common=tuple(zip(common or [], [float(f) for f in freqs or []], strict=False)),
        )
    return TableStats(rows=rows, columns=columns, readable=readable, source="pg_stats" if columns else "")
