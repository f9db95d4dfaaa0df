"""PostgreSQL's relations as the masking analysis reflected them, for the re-verification
(`mcpkit.sql.relcheck`, red team rt33c F1/F2): one row per column of every table, view,
materialized view, foreign or partitioned table in a schema the role may use, with the relation's
oid (its identity: privileges follow the relation, not its name)."""

from __future__ import annotations

from typing import Final

__all__ = ["PG_RELATIONS"]

PG_RELATIONS: Final = (
    "SELECT n.nspname, c.relname, c.oid::bigint, a.attname FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
    " WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND has_schema_privilege(n.oid, 'USAGE')"
    " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    " AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"
    " ORDER BY n.nspname, c.relname, a.attnum"
)
"""Rows `(schema, relation, oid, column or NULL)`, columns in table order."""
