"""MariaDB's and MySQL's statistics for `profile_table`: index cardinality from information_schema.

`information_schema.STATISTICS` shows the indexes of tables the login holds a privilege on; the
cardinality of an index's first column is the server's distinct estimate for that column. MariaDB's
engine-independent statistics (`mysql.column_stats`: bounds, null ratio) are not read: they need
SELECT on the `mysql` schema, which a least-privilege login does not hold, and they are not
filtered by column privilege, so a login that could read them would learn about columns it may not
select. Bounds, nulls and common values come from a bounded sample instead.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import ColumnStats, TableStats

__all__ = ["mysql_table_stats"]

_CARDINALITY: Final = (
    "SELECT COLUMN_NAME, MAX(CARDINALITY) FROM information_schema.STATISTICS"
    " WHERE TABLE_SCHEMA = COALESCE(:schema, DATABASE()) AND TABLE_NAME = :table"
    " AND SEQ_IN_INDEX = 1 AND CARDINALITY IS NOT NULL GROUP BY COLUMN_NAME"
)
_COLUMNS: Final = (
    "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
    " WHERE TABLE_SCHEMA = COALESCE(:schema, DATABASE()) AND TABLE_NAME = :table"
)


def mysql_table_stats(conn: Connection, schema: str | None, table: str) -> TableStats:
    """Distinct estimates of indexed columns the login can see (information_schema filters them)."""
    params = {"schema": schema, "table": table}
    readable = frozenset(str(r[0]) for r in conn.execute(text(_COLUMNS), params))
    columns = {
        str(name): ColumnStats(distinct=float(card))
        for name, card in conn.execute(text(_CARDINALITY), params)
        if str(name) in readable
    }
    return TableStats(
        columns=columns, readable=readable or None, source="index cardinality" if columns else ""
    )
