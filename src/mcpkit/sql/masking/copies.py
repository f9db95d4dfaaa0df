"""Columns that hold copies of masked values by a foreign key: `orders.customer_email REFERENCES
customers(email)` stores the e-mail itself, so it is masked like the column it references."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.base import DerivedMask

__all__ = ["copied_masks"]

# MariaDB refuses SHOW CREATE TABLE (SQLAlchemy's reflection of keys) to an account that holds
# only column privileges; the catalog lists the keys of the tables it may read.
_MYSQL_KEYS = (
    "SELECT column_name, referenced_table_name, referenced_column_name"
    " FROM information_schema.KEY_COLUMN_USAGE WHERE table_schema = DATABASE() AND table_name = :t"
    " AND referenced_table_schema = DATABASE() AND referenced_column_name IS NOT NULL"
)

Key = tuple[str, str, str]  # column, referenced table, referenced column


def _keys(conn: Connection, table: str) -> list[Key]:
    try:
        found = inspect(conn).get_foreign_keys(table)
    except DBAPIError:
        if conn.dialect.name not in ("mysql", "mariadb"):
            raise
        return [(str(c), str(t), str(r)) for c, t, r in conn.execute(text(_MYSQL_KEYS), {"t": table})]
    return [
        (c, fk["referred_table"], r)
        for fk in found
        if not fk.get("referred_schema")  # the default schema, where the masked keys resolve
        for c, r in zip(fk["constrained_columns"], fk["referred_columns"], strict=False)
    ]


def copied_masks(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
    """The default schema's columns that reference a masked column by a foreign key (directly or
    through another such copy), to be masked and withheld like it.

    Args:
        conn: A connection (a call's session or an administrator's).
        masked: Table -> its masked columns, in the default schema.
    """
    tables = list(inspect(conn).get_table_names())
    keys = {t: _keys(conn, t) for t in tables}
    folded = {t.casefold(): {c.casefold() for c in cols} for t, cols in masked.items()}
    found: dict[str, dict[str, str]] = {}
    changed = True
    while changed:  # a copy of a copy: until nothing new is found
        changed = False
        for table, refs in keys.items():
            mine = folded.setdefault(table.casefold(), set())
            for column, target, referenced in refs:
                if (
                    referenced.casefold() in folded.get(target.casefold(), set())
                    and column.casefold() not in mine
                ):
                    mine.add(column.casefold())
                    found.setdefault(table, {})[column] = f"{target}.{referenced}"
                    changed = True
    return [
        DerivedMask(
            table, None, table, frozenset(cols), "a foreign key copies " + ", ".join(sorted(cols.values()))
        )
        for table, cols in found.items()
    ]
