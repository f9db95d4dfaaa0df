"""Start-up checks and doctor probes: who the account is, what it can write, whether limits hold."""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError

__all__ = [
    "AccountReport",
    "ProbeResult",
    "ensure_safe_account",
    "inspect_account",
    "probe_read_only",
    "probe_timeout",
]

log = logging.getLogger("mcpkit.sql")

_PG_ACCOUNT: Final = (
    "SELECT current_user, rolsuper, version(),"
    " pg_has_role(current_user, 'pg_write_server_files', 'MEMBER'),"
    " pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER')"
    " FROM pg_catalog.pg_roles WHERE rolname = current_user"
)
_PG_WRITABLE: Final = (
    "SELECT n.nspname || '.' || c.relname FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    " AND n.nspname NOT LIKE 'pg_toast%' AND has_schema_privilege(n.oid, 'USAGE')"
    " AND has_table_privilege(c.oid, 'SELECT')"
    " AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') ORDER BY 1 LIMIT 1000"
)
# MySQL/MariaDB privileges that reach past one database's data: files, users, server state.
_MYSQL_ADMIN: Final = frozenset(
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
_MYSQL_WRITE: Final = frozenset({"INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "CREATE"})
_PROBE_TIMEOUT_S: Final = 1.0
_FOREVER: Final[dict[str, str]] = {
    "postgres": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "sqlite": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "mysql": "SELECT SLEEP(100000)",  # MariaDB caps recursive CTEs at max_recursive_iterations
}


@dataclass
class AccountReport:
    """Who the server connects as and what that account could change."""

    dialect: str
    version: str
    user: str
    superuser: bool
    superuser_reason: str | None = None
    writable: list[str] = field(default_factory=list)
    read_only_enforced: bool = True


@dataclass
class ProbeResult:
    """One doctor probe: ok or not, and a sentence for the operator."""

    ok: bool
    detail: str


_MYSQL_PRIVILEGES: Final[dict[str, str]] = {
    "global": "SELECT PRIVILEGE_TYPE, '*' FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = :g",
    "schema": "SELECT PRIVILEGE_TYPE, TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES"
    " WHERE GRANTEE = :g",
    "table": "SELECT PRIVILEGE_TYPE, CONCAT(TABLE_SCHEMA, '.', TABLE_NAME)"
    " FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = :g",
}


def _postgres_account(conn: Connection) -> AccountReport:
    user, rolsuper, version, write_files, run_programs = conn.execute(text(_PG_ACCOUNT)).one()
    reason = "rolsuper" if rolsuper else "pg_execute_server_program" if run_programs else None
    reason = reason or ("pg_write_server_files" if write_files else None)
    writable = [str(r[0]) for r in conn.execute(text(_PG_WRITABLE))]
    return AccountReport("postgres", str(version), str(user), reason is not None, reason, writable)


def _mysql_account(conn: Connection) -> AccountReport:
    current, version = conn.execute(text("SELECT CURRENT_USER(), VERSION()")).one()
    user, _, host = str(current).rpartition("@")
    grantee = f"'{user}'@'{host}'"
    privileges = {
        scope: [(str(p), str(o)) for p, o in conn.execute(text(q), {"g": grantee})]
        for scope, q in _MYSQL_PRIVILEGES.items()
    }
    admin = sorted({p for p, _ in privileges["global"]} & _MYSQL_ADMIN)
    writable = sorted(
        {
            "*.* (global)" if scope == "global" else f"{on}.*" if scope == "schema" else on
            for scope, rows in privileges.items()
            for p, on in rows
            if p in _MYSQL_WRITE
        }
    )
    return AccountReport("mysql", str(version), str(current), bool(admin), ", ".join(admin) or None, writable)


def _sqlite_account(conn: Connection, path: str) -> AccountReport:
    version = str(conn.execute(text("SELECT sqlite_version()")).scalar())
    writable = ["(the database file; mcpkit opens it read-only)"] if os.access(path, os.W_OK) else []
    return AccountReport("sqlite", version, f"uid {os.getuid()}", False, None, writable)


def inspect_account(engine: SqlEngine, call_id: str = "startup") -> AccountReport:
    """Connect as the server would and describe the account.

    Args:
        engine: The engine.
        call_id: For the log and the database's session identity.

    Returns:
        The report (PostgreSQL `rolsuper` and file roles, MySQL SUPER/FILE/admin privileges,
        tables it can write, SQLite file writability).
    """
    with engine.session(30.0, call_id) as (conn, _):
        if engine.dialect == "postgres":
            return _postgres_account(conn)
        if engine.dialect == "mysql":
            return _mysql_account(conn)
        if engine.dialect == "sqlite":
            return _sqlite_account(conn, engine.url.database or "")
    return AccountReport(engine.dialect, "unknown", "unknown", False, None, [], read_only_enforced=False)


def ensure_safe_account(report: AccountReport, allow_superuser: bool = False) -> None:
    """Refuse to serve as a superuser unless allowed; warn when the account can write what it reads.

    Raises:
        SqlConfigError: the account is a superuser (or holds file/admin privileges).
    """
    if report.superuser and not allow_superuser:
        raise SqlConfigError(
            "The database account is a superuser or holds server-wide privileges "
            f"({report.superuser_reason}); connect as a read-only account, or pass --allow-superuser."
        )
    if report.superuser:
        log.warning(
            "serving as a superuser account (%s), as --allow-superuser asked", report.superuser_reason
        )
    if report.writable:
        shown = ", ".join(report.writable[:10]) + (" ..." if len(report.writable) > 10 else "")
        log.warning("the account can write %d table(s) it can read: %s", len(report.writable), shown)
    if not report.read_only_enforced:
        log.warning(
            "%s: no database-enforced read-only session is known; rely on the account's grants",
            report.dialect,
        )


def probe_read_only(engine: SqlEngine) -> ProbeResult:
    """Try a write inside the read-only session; it must be refused by the database."""
    name = f"mcpkit_doctor_probe_{secrets.token_hex(4)}"
    try:
        engine.execute(f"CREATE TABLE {name} (a INTEGER)", None, 1, 10.0, "doctor-ro")
    except QueryFailed as exc:
        if exc.kind in ("read_only", "permission"):
            return ProbeResult(True, "a write inside the read-only session was refused by the database")
        return ProbeResult(False, f"the write probe failed for another reason ({exc.kind})")
    except QueryTimeout:
        return ProbeResult(False, "the write probe timed out")
    try:  # the write went through: read-only is not enforced; remove the probe table
        with engine.sa_engine.begin() as conn:
            conn.execute(text(f"DROP TABLE {name}"))
    except Exception:
        log.exception("doctor: could not drop %s", name)
    return ProbeResult(False, "a write inside the session SUCCEEDED: the session is not read-only")


def probe_timeout(engine: SqlEngine, timeout_s: float = _PROBE_TIMEOUT_S) -> ProbeResult:
    """Run a query that never ends with a short timeout: it must stop in time and the server answer after."""
    forever = _FOREVER.get(engine.dialect)
    if forever is None:
        return ProbeResult(False, f"no timeout probe is known for {engine.dialect}")
    started = time.monotonic()
    try:
        engine.execute(forever, None, 1, timeout_s, "doctor-timeout")
    except QueryTimeout:
        pass
    except QueryFailed as exc:
        return ProbeResult(False, f"the endless probe failed instead of timing out ({exc.kind})")
    took = time.monotonic() - started  # an interrupted MySQL SLEEP returns a row instead of failing
    try:
        engine.execute("SELECT 1", None, 1, 5.0, "doctor-after")
    except (QueryFailed, QueryTimeout):
        return ProbeResult(False, "the server did not answer after the timeout")
    ok = took < timeout_s + 3.0
    return ProbeResult(ok, f"an endless query was stopped after {took:.1f} s (limit {timeout_s:g} s)")
