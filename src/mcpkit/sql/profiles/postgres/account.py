"""PostgreSQL: who the execution identity is and what it could change."""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import AccountReport

__all__ = ["inspect_postgres"]

_ACCOUNT: Final = (
    "SELECT current_user, rolsuper, version(),"
    " pg_has_role(current_user, 'pg_write_server_files', 'MEMBER'),"
    " pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER')"
    " FROM pg_catalog.pg_roles WHERE rolname = current_user"
)
_WRITABLE: Final = (
    "SELECT n.nspname || '.' || c.relname FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    " AND n.nspname NOT LIKE 'pg_toast%' AND has_schema_privilege(n.oid, 'USAGE')"
    " AND has_table_privilege(c.oid, 'SELECT')"
    " AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') ORDER BY 1 LIMIT 1000"
)


def inspect_postgres(conn: Connection) -> AccountReport:
    """The role the calls run as: superuser or file roles, and the tables it can write."""
    user, rolsuper, version, write_files, run_programs = conn.execute(text(_ACCOUNT)).one()
    reason = "rolsuper" if rolsuper else "pg_execute_server_program" if run_programs else None
    reason = reason or ("pg_write_server_files" if write_files else None)
    writable = [str(r[0]) for r in conn.execute(text(_WRITABLE))]
    return AccountReport("postgres", str(version), str(user), reason is not None, reason, writable)
