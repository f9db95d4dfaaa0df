"""`mcpkit sql grant` on PostgreSQL: the SQL that creates a reader role the start-up check accepts.

The script is tried first inside a transaction that is rolled back (PostgreSQL's DDL, CREATE ROLE
included, is transactional): the role is created, granted, taken on with SET ROLE and inspected
exactly as the server inspects it at start-up; the fixes of what it finds (REVOKE EXECUTE ... FROM
PUBLIC on hazardous functions, ...) are added and tried again, so the printed script starts clean.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import merge_findings, quote_role
from mcpkit.sql.profiles.postgres.account import LOG_MIN_MESSAGES, TEMP_FILE_LIMIT
from mcpkit.sql.profiles.postgres.grant_reach import unreadable_notes

__all__ = ["postgres_grant"]


def _quote(conn: Connection, name: str) -> str:
    return str(conn.execute(text("SELECT quote_ident(:n)"), {"n": name}).scalar())


def _base(conn: Connection, role: str, tables: Sequence[str], password: str, limit: int) -> list[str]:
    quoted = quote_role(role)
    if conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first():
        raise SqlConfigError(f"role {role} exists already; name a new reader role")
    script = [
        f"CREATE ROLE {quoted} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE CONNECTION LIMIT {limit}"
        f" PASSWORD '{password}'"
    ]
    schemas: list[str] = []
    for name in tables:
        schema, _, table = name.rpartition(".")
        schema = schema or "public"
        found = conn.execute(
            text(
                "SELECT quote_ident(n.nspname), quote_ident(c.relname) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :s AND c.relname = :t"
                " AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
            ),
            {"s": schema, "t": table},
        ).first()
        if found is None:
            raise SqlConfigError(f"no table or view {schema}.{table}")
        if found[0] not in schemas:
            schemas.append(found[0])
            script.append(f"GRANT USAGE ON SCHEMA {found[0]} TO {quoted}")
        script.append(f"GRANT SELECT ON {found[0]}.{found[1]} TO {quoted}")
    database = _quote(conn, str(conn.execute(text("SELECT current_database()")).scalar()))
    script.append(f"ALTER ROLE {quoted} IN DATABASE {database} SET search_path = {', '.join(schemas)}")
    script.append(f"ALTER ROLE {quoted} SET temp_file_limit = '{TEMP_FILE_LIMIT}'")
    script.append(f"ALTER ROLE {quoted} SET log_min_messages = '{LOG_MIN_MESSAGES}'")
    return script


_REVOKE_SELECT: Final = re.compile(r"REVOKE SELECT ON (\S+) FROM .+")
_GRANT_SELECT: Final = re.compile(r"GRANT SELECT ON (\S+) TO .+")


def _granted(script: Sequence[str]) -> list[str]:
    """The relations the script grants SELECT on, as it quotes them."""
    return [m[1] for m in map(_GRANT_SELECT.fullmatch, script) if m is not None]


def _own_grant(fix: str, script: list[str]) -> int | None:
    """The index of the script's own GRANT SELECT a `REVOKE SELECT ON X FROM ...` fix takes back (a
    materialized view read with a superuser owner's rights, red team rt33c N1): the grant is left
    out with why, rather than printed and then revoked."""
    found = _REVOKE_SELECT.fullmatch(fix)
    if found is None:
        return None
    prefix = f"GRANT SELECT ON {found[1]} TO "
    return next((i for i, s in enumerate(script) if s.startswith(prefix)), None)


def postgres_grant(
    conn: Connection, role: str, tables: Sequence[str], password: str, limit: int
) -> list[str]:
    """The statements an administrator runs (a `--` entry is a comment: a grant left out, with why);
    `conn` is an administrator's, nothing is committed.

    `limit` is the login's CONNECTION LIMIT: the pool's connections and a margin (a statement
    that ignores its timeout and cancel, such as LIKE over a long pattern, keeps its backend
    after the call; the limit bounds how many do).

    Raises:
        SqlConfigError: the role exists, a table does not, or a finding has no SQL fix.
    """
    from mcpkit.sql.profiles.postgres.account import inspect_postgres

    script = _base(conn, role, tables, password, limit)
    conn.rollback()
    for _ in range(3):
        trial = conn.begin()
        try:
            for statement in script:
                if not statement.startswith("--"):
                    conn.exec_driver_sql(statement)
            conn.execute(text(f"SET LOCAL ROLE {quote_role(role)}"))
            findings = inspect_postgres(conn).findings
            notes = [] if findings else unreadable_notes(conn, _granted(script))
        finally:
            trial.rollback()
        if not findings:
            return script + notes
        # A fix with alternatives ("ALTER VIEW ... SET (security_invoker = on); or REVOKE ...")
        # changes an object for everyone: the administrator chooses, the script does not; so does
        # `ALTER FUNCTION ... RESET` of a function's own setting (`fnconfig`).
        unfixable = [
            f
            for f in findings
            if "<" in f.fix
            or "; or " in f.fix
            or f.code == "function-config"
            or not f.fix.startswith(("REVOKE", "ALTER", "DROP"))
        ]
        if unfixable:
            raise SqlConfigError("cannot write a clean grant: " + unfixable[0].line())
        for f in merge_findings(findings):
            fix = f.fix.split("  --")[0]
            own = _own_grant(fix, script)
            if own is not None:
                script[own] = f"-- left out: {f.message}; no grant on it"
            elif fix not in script:
                script.append(fix)
    raise SqlConfigError("the grant does not come out clean after its own fixes")
