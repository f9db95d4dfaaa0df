"""MySQL and MariaDB's relations as the masking analysis reflected them, for the re-verification
(`mcpkit.sql.relcheck`, red team rt33c F1/F2): one row per column the account can see of every
table and view outside the system schemas. There is no relation identity to read: a table's
CREATE_TIME moves with every ALTER, and privileges are kept by name (a renamed table does not take
its grants along), so names and column lists are what the checks compare."""

from __future__ import annotations

from typing import Final

__all__ = ["MYSQL_RELATIONS"]

MYSQL_RELATIONS: Final = (
    "SELECT table_schema, table_name, NULL, column_name FROM information_schema.COLUMNS"
    " WHERE table_schema NOT IN ('information_schema', 'performance_schema', 'mysql', 'sys')"
    " ORDER BY table_schema, table_name, ordinal_position"
)
"""Rows `(schema, relation, NULL, column)`, columns in table order."""
