"""MySQL/MariaDB triggers on tables with masked columns (`profiles.triggers` words the warning).

Every MariaDB trigger is a row trigger. `information_schema.TRIGGERS` lists a table's triggers only
to an account with the TRIGGER privilege on it, which a reader does not hold: run `doctor --mask`
with the administrator's DSN to see them (docs/masking.md)."""

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


def trigger_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """One warning per trigger, BEFORE or AFTER, on a table with masked columns."""
    out = []
    for key in sorted(masked):
        schema, table = split_key(key)
        for name, timing, body in conn.execute(text(_TRIGGERS), {"schema": schema, "table": table}).all():
            out.append(trigger_hint(key, str(name), str(timing), None if body is None else str(body)))
    return out
