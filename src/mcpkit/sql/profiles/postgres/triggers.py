"""PostgreSQL row triggers and rewrite rules on tables with masked columns (`profiles.triggers` words
the warning)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.postgres.catalog_path import on_path
from mcpkit.sql.profiles.triggers import rule_hint, trigger_hint

__all__ = ["trigger_hints"]

# Row triggers (tgtype bit 1), any timing (bit 2 BEFORE, bit 64 INSTEAD OF, else AFTER), with the
# function's source where it is text (not C or internal). The built-in full-text triggers are left
# out: what they write is derived and masked (`masks._trigger_copies`).
_ROW_TRIGGERS: Final = """
SELECT t.tgname,
       CASE WHEN t.tgtype & 2 = 2 THEN 'BEFORE' WHEN t.tgtype & 64 = 64 THEN 'INSTEAD OF' ELSE 'AFTER' END,
       CASE WHEN l.lanname NOT IN ('c', 'internal') THEN p.prosrc END
FROM pg_catalog.pg_trigger t
JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE t.tgrelid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))
  AND NOT t.tgisinternal AND t.tgtype & 1 = 1
  AND NOT (n.nspname = 'pg_catalog'
           AND p.proname IN ('tsvector_update_trigger', 'tsvector_update_trigger_column'))
ORDER BY t.tgname
"""
# Rewrite rules (a table's `_RETURN` rule makes it a view; none here), with their definition: what
# follows its DO is the actions, run with the rule owner's rights on each write to the table.
_RULES: Final = """
SELECT r.rulename, CASE r.ev_type WHEN '1' THEN 'SELECT' WHEN '2' THEN 'UPDATE' WHEN '3' THEN 'INSERT'
                                  ELSE 'DELETE' END,
       pg_catalog.pg_get_ruledef(r.oid)
FROM pg_catalog.pg_rewrite r
WHERE r.ev_class = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table)) AND r.rulename <> '_RETURN'
ORDER BY r.rulename
"""
_DO: Final = re.compile(r"\bDO\s+(?:INSTEAD\s+|ALSO\s+)?", re.IGNORECASE)


def trigger_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """One warning per row trigger, BEFORE, AFTER or INSTEAD OF, and per rewrite rule on a table
    with masked columns."""
    out = []
    for table in sorted(masked):
        for name, timing, body in conn.execute(text(_ROW_TRIGGERS), {"table": on_path(conn, table)}).all():
            out.append(trigger_hint(table, str(name), str(timing), None if body is None else str(body)))
        for name, event, definition in conn.execute(text(_RULES), {"table": on_path(conn, table)}).all():
            found = _DO.search(str(definition))
            actions = str(definition)[found.end() :] if found else str(definition)
            out.append(rule_hint(table, str(name), str(event), actions))
    return out
