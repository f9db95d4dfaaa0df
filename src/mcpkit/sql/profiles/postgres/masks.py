"""Masked columns on PostgreSQL: the calls' role must hold SELECT on the other columns only."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding

__all__ = ["readable_masked_columns"]

# Resolved through the session's search_path, as the calls' queries resolve the name; the
# privilege is the engine's own answer for this role (direct, through PUBLIC or a membership).
_COLUMNS = """
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(current_user),
       array_agg(a.attname ORDER BY a.attnum)
           FILTER (WHERE a.attname = ANY(:masked) AND has_column_privilege(c.oid, a.attnum, 'SELECT')),
       array_agg(quote_ident(a.attname) ORDER BY a.attnum) FILTER (WHERE NOT a.attname = ANY(:masked))
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = to_regclass(quote_ident(:table))
GROUP BY n.nspname, c.relname
"""


def readable_masked_columns(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per table whose masked columns the current role can still select.

    The fix revokes the table-wide SELECT and grants the other columns (column privileges).
    """
    findings = []
    for table, columns in sorted(masked.items()):
        row = conn.execute(text(_COLUMNS), {"table": table, "masked": sorted(columns)}).first()
        if row is None or not row[2]:
            continue
        name, role, readable, others = row
        grant = f"GRANT SELECT ({', '.join(others)}) ON {name} TO {role}" if others else ""
        findings.append(
            Finding(
                "masked-column-readable",
                f"can read masked column(s) {', '.join(readable)} of {name}",
                f"REVOKE SELECT ON {name} FROM {role}; {grant}".rstrip("; ")
                + " (also from PUBLIC or the role that grants it, where it comes from there)",
            )
        )
    return findings
