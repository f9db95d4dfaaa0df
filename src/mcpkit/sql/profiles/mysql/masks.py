"""Masked columns on MySQL/MariaDB: the calls' account must hold SELECT on the other columns only."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.base import Finding

__all__ = ["readable_masked_columns"]

_COLUMNS = (
    "SELECT column_name FROM information_schema.COLUMNS"
    " WHERE table_schema = DATABASE() AND table_name = :table ORDER BY ordinal_position"
)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _readable(conn: Connection, table: str, column: str) -> bool:
    # A probe the server itself answers: global, database, table and column grants, roles and
    # wildcard hosts included (the information_schema privilege views list grants per level and
    # leave the combination to the reader). `WHERE 1 = 0` reads no row.
    try:
        conn.exec_driver_sql(f"SELECT {_quote(column)} FROM {_quote(table)} WHERE 1 = 0").fetchall()
    except DBAPIError:
        return False
    return True


def readable_masked_columns(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per table whose masked columns the current account can still select."""
    user, host = str(conn.execute(text("SELECT CURRENT_USER()")).scalar()).rsplit("@", 1)
    database = str(conn.execute(text("SELECT DATABASE()")).scalar())
    account = f"'{user}'@'{host}'"
    findings = []
    for table, columns in sorted(masked.items()):
        readable = [c for c in sorted(columns) if _readable(conn, table, c)]
        if not readable:
            continue
        folded = {c.casefold() for c in columns}
        others = [str(r[0]) for r in conn.execute(text(_COLUMNS), {"table": table})]
        others = [_quote(c) for c in others if c.casefold() not in folded]
        name = f"{_quote(database)}.{_quote(table)}"
        grant = f"; GRANT SELECT ({', '.join(others)}) ON {name} TO {account}" if others else ""
        findings.append(
            Finding(
                "masked-column-readable",
                f"can read masked column(s) {', '.join(readable)} of {name}",
                f"REVOKE SELECT ON {name} FROM {account}{grant} (a SELECT on {_quote(database)}.* or *.* "
                "must be replaced by grants per table: SHOW GRANTS)",
            )
        )
    return findings
