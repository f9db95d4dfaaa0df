"""MySQL/MariaDB triggers on tables with masked columns (`profiles.triggers` words the warning).

Every MariaDB trigger is a row trigger. `information_schema.TRIGGERS` (and `SHOW TRIGGERS`, `SHOW
CREATE TRIGGER`) list a table's triggers only to an account with the TRIGGER privilege on it, which a
reader does not hold (start-up refuses it) and no other catalog shows them (MariaDB 10.11): without
the privilege the listing is empty, not refused. So a masked table whose triggers the account cannot
see gets a warning saying so, with the statement an administrator runs to list them, instead of
silence (`doctor --mask` with the administrator's DSN names them; docs/masking.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.scan_order import split_key
from mcpkit.sql.profiles.triggers import trigger_hint

__all__ = ["trigger_hints"]

_TRIGGERS: Final = (
    "SELECT trigger_name, action_timing, action_statement FROM information_schema.TRIGGERS"
    " WHERE event_object_schema = COALESCE(:schema, DATABASE()) AND event_object_table = :table"
    " ORDER BY trigger_name"
)
# Whether the account holds TRIGGER on the table (globally, on its database, or on it). A TRIGGER
# held through a role does not show here; its triggers do show in TRIGGERS, so only a table without
# triggers is then told about needlessly.
_SEES: Final = (
    "SELECT COALESCE(:schema, DATABASE()),"
    " EXISTS (SELECT 1 FROM information_schema.USER_PRIVILEGES WHERE privilege_type = 'TRIGGER')"
    " OR EXISTS (SELECT 1 FROM information_schema.SCHEMA_PRIVILEGES WHERE privilege_type = 'TRIGGER'"
    " AND COALESCE(:schema, DATABASE()) LIKE table_schema)"
    " OR EXISTS (SELECT 1 FROM information_schema.TABLE_PRIVILEGES WHERE privilege_type = 'TRIGGER'"
    " AND table_schema = COALESCE(:schema, DATABASE()) AND table_name = :table)"
)


def trigger_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """One warning per trigger, BEFORE or AFTER, on a table with masked columns."""
    out, hidden = [], []
    for key in sorted(masked):
        schema, table = split_key(key)
        names = {"schema": schema, "table": table}
        rows = conn.execute(text(_TRIGGERS), names).all()
        for name, timing, body in rows:
            out.append(trigger_hint(key, str(name), str(timing), None if body is None else str(body)))
        database, sees = conn.execute(text(_SEES), names).one()
        if not rows and not sees:
            hidden.append((key, str(database), table))
    if hidden:
        quote = conn.dialect.identifier_preparer.quote_identifier
        shows = "; ".join(
            f"SHOW TRIGGERS FROM {quote(db)} WHERE `Table` = '{table.replace(chr(39), chr(39) * 2)}'"
            for _, db, table in hidden
        )
        out.append(
            f"this account cannot see the triggers of masked table(s) {', '.join(k for k, _, _ in hidden)}:"
            " MariaDB and MySQL list a table's triggers only to an account with the TRIGGER privilege on it,"
            " which a reader does not hold, so a row trigger copying a masked value into another table"
            f" would go unnoticed; have an administrator run {shows} (or `mcpkit sql doctor --mask`"
            " with the administrator's DSN) and mask what each trigger copies"
        )
    return out
