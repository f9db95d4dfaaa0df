"""MySQL and MariaDB: who the login is and what it could change."""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import AccountReport

__all__ = ["inspect_mysql"]

# Privileges that reach past one database's data: files, users, server state.
_ADMIN: Final = frozenset(
    {
        "SUPER",
        "FILE",
        "CREATE USER",
        "SHUTDOWN",
        "RELOAD",
        "READ_ONLY ADMIN",
        "SYSTEM_VARIABLES_ADMIN",
        "CONNECTION ADMIN",
        "CONNECTION_ADMIN",
        "ALL PRIVILEGES",
    }
)
_WRITE: Final = frozenset({"INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "CREATE"})
_PRIVILEGES: Final[dict[str, str]] = {
    "global": "SELECT PRIVILEGE_TYPE, '*' FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = :g",
    "schema": "SELECT PRIVILEGE_TYPE, TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES"
    " WHERE GRANTEE = :g",
    "table": "SELECT PRIVILEGE_TYPE, CONCAT(TABLE_SCHEMA, '.', TABLE_NAME)"
    " FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = :g",
}


def inspect_mysql(conn: Connection) -> AccountReport:
    """The login: SUPER/FILE/admin privileges, and what it can write."""
    current, version = conn.execute(text("SELECT CURRENT_USER(), VERSION()")).one()
    user, _, host = str(current).rpartition("@")
    grantee = f"'{user}'@'{host}'"
    privileges = {
        scope: [(str(p), str(o)) for p, o in conn.execute(text(q), {"g": grantee})]
        for scope, q in _PRIVILEGES.items()
    }
    admin = sorted({p for p, _ in privileges["global"]} & _ADMIN)
    writable = sorted(
        {
            "*.* (global)" if scope == "global" else f"{on}.*" if scope == "schema" else on
            for scope, rows in privileges.items()
            for p, on in rows
            if p in _WRITE
        }
    )
    return AccountReport("mysql", str(version), str(current), bool(admin), ", ".join(admin) or None, writable)
