"""PostgreSQL: who the execution identity is (after any SET ROLE) and what it must not hold."""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.profiles.base import AccountReport, ConnectionBudget, Finding
from mcpkit.sql.profiles.postgres.fnconfig import config_findings
from mcpkit.sql.profiles.postgres.knowledge import ROLES
from mcpkit.sql.profiles.postgres.membership import reaches
from mcpkit.sql.profiles.postgres.overloads import OptIns
from mcpkit.sql.profiles.postgres.routes import audit_routes
from mcpkit.sql.profiles.postgres.servers import server_findings
from mcpkit.sql.profiles.postgres.switch import switched_findings
from mcpkit.sql.profiles.postgres.views import owner_views, rls_parents

__all__ = ["TEMP_FILE_LIMIT", "connection_limit_warnings", "inspect_postgres", "temp_file_warnings"]

_ACCOUNT: Final = (
    "SELECT current_user, quote_ident(current_user), rolsuper, rolcreaterole, rolbypassrls, rolreplication,"
    " version() FROM pg_catalog.pg_roles WHERE rolname = current_user"
)
# A predefined role whose rights the current role holds or can take on (`membership.reaches`), and
# the direct grant that gives it.
_MEMBERSHIPS: Final = """
SELECT r.rolname, coalesce((SELECT quote_ident(g.rolname) FROM pg_auth_members m
    JOIN pg_roles g ON g.oid = m.roleid
    WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)
      AND pg_has_role(g.oid, r.oid, 'MEMBER') ORDER BY g.oid = r.oid DESC LIMIT 1), r.rolname)
FROM pg_roles r WHERE r.rolname = ANY(:names) AND {reach}
ORDER BY 1
"""
# Foreign tables the role can read: each read leaves this database (another server through
# postgres_fdw, a server file or program through file_fdw, any other wrapper's source).
_FOREIGN: Final = """
SELECT n.nspname || '.' || c.relname, quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       s.srvname, w.fdwname
FROM pg_foreign_table ft
JOIN pg_class c ON c.oid = ft.ftrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_foreign_server s ON s.oid = ft.ftserver
JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
WHERE has_schema_privilege(n.oid, 'USAGE')
  AND (has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'))
ORDER BY 1
"""
# With the membership that leads to the owner (NULL: the role owns it itself).
_OWNED: Final = """
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname),
  (SELECT quote_ident(g.rolname) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
    WHERE c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
      AND m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)
      AND pg_has_role(g.oid, c.relowner, 'MEMBER') ORDER BY g.oid = c.relowner DESC LIMIT 1)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%' AND {reach} ORDER BY 1 LIMIT 1000
"""
# Roles the current role can SET ROLE to (NOINHERIT and transitive memberships count; PostgreSQL 16:
# or inherits from, or administers) that hold an attribute a reader must not reach, with the direct
# grant that leads there.
_POWERFUL_MEMBERSHIPS: Final = """
SELECT r.rolname, concat_ws(', ', CASE WHEN r.rolsuper THEN 'SUPERUSER' END,
    CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END, CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END,
    CASE WHEN r.rolreplication THEN 'REPLICATION' END),
  coalesce((SELECT quote_ident(g.rolname) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
    WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)
      AND pg_has_role(g.oid, r.oid, 'MEMBER') ORDER BY g.oid = r.oid DESC LIMIT 1), quote_ident(r.rolname))
FROM pg_roles r WHERE r.rolname <> current_user AND {reach}
  AND (r.rolsuper OR r.rolcreaterole OR r.rolbypassrls OR r.rolreplication)
ORDER BY 1
"""
_CREATE_DATABASE: Final = """
SELECT quote_ident(d.datname), coalesce((SELECT string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
       ELSE quote_ident(a.grantee::regrole::text) END, ', ')
     FROM aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
     WHERE a.privilege_type = 'CREATE' AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE'))), ''),
  pg_has_role(d.datdba, 'MEMBER')
FROM pg_database d WHERE d.datname = current_database() AND has_database_privilege(d.oid, 'CREATE')
"""
_CREATE: Final = """
SELECT quote_ident(n.nspname), coalesce((SELECT string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
       ELSE quote_ident(a.grantee::regrole::text) END, ', ')
     FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
     WHERE a.privilege_type = 'CREATE' AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE'))), ''),
  pg_has_role(n.nspowner, 'USAGE')
FROM pg_namespace n WHERE has_schema_privilege(n.oid, 'CREATE')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_temp%'
  AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1
"""
# Superuser-only settings granted to the role (GRANT SET / ALTER SYSTEM ON PARAMETER, PostgreSQL
# 15+), directly, through a role it is a member of, or to PUBLIC: `session_replication_role` turns
# off triggers and foreign keys, `lo_compat_privileges` the large objects' ACLs, ...
_PARAMETERS: Final = """
SELECT p.parname, string_agg(DISTINCT a.privilege_type, ', ' ORDER BY a.privilege_type),
       string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text)
                  END, ', ')
FROM pg_catalog.pg_parameter_acl p, aclexplode(p.paracl) a
WHERE a.grantee = 0 OR pg_has_role(a.grantee, 'MEMBER')
GROUP BY p.parname ORDER BY 1
"""
_WRITABLE: Final = (
    "SELECT n.nspname || '.' || c.relname FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    " AND n.nspname NOT LIKE 'pg_toast%' AND has_schema_privilege(n.oid, 'USAGE')"
    " AND has_table_privilege(c.oid, 'SELECT')"
    " AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') ORDER BY 1 LIMIT 1000"
)


def _role_findings(conn: Connection) -> tuple[str, str, bool, list[Finding]]:
    user, quoted, rolsuper, createrole, bypassrls, replication, version = conn.execute(text(_ACCOUNT)).one()
    found: list[Finding] = []
    if rolsuper:
        found.append(
            Finding(
                "superuser", f"role {user} is a superuser", f"ALTER ROLE {quoted} NOSUPERUSER", "superuser"
            )
        )
    if createrole and not rolsuper:  # a superuser holds these implicitly; its own finding says so
        found.append(
            Finding(
                "createrole",
                f"role {user} has CREATEROLE (it can grant itself other roles)",
                f"ALTER ROLE {quoted} NOCREATEROLE",
            )
        )
    if bypassrls and not rolsuper:
        found.append(
            Finding(
                "bypassrls",
                f"role {user} has BYPASSRLS (row-level security does not apply to it)",
                f"ALTER ROLE {quoted} NOBYPASSRLS",
                "bypassrls",
            )
        )
    if replication and not rolsuper:
        found.append(
            Finding(
                "replication",
                f"role {user} has REPLICATION (it can read the write-ahead log)",
                f"ALTER ROLE {quoted} NOREPLICATION",
            )
        )
    if not rolsuper:
        reach = reaches(conn, "current_user", "r.oid")
        for name, attributes, via in conn.execute(text(_POWERFUL_MEMBERSHIPS.format(reach=reach))):
            found.append(
                Finding(
                    "powerful-membership",
                    f"role {user} is a member of {name}, which has {attributes}"
                    + (f" (through {via})" if via != name else "")
                    + "; SET ROLE takes it on, INHERIT or not",
                    f"REVOKE {via} FROM {quoted}",
                    "superuser" if "SUPERUSER" in attributes else None,
                )
            )
        for name, via in conn.execute(text(_MEMBERSHIPS.format(reach=reach)), {"names": sorted(ROLES)}):
            stats = name in ("pg_read_all_stats", "pg_monitor")
            # Admission refuses pg_settings and current_setting is off the allowlist; the opt-in
            # says the operator accepts the paths being one --allow-function away.
            settings = name == "pg_read_all_settings"
            found.append(
                Finding(
                    name,
                    f"role {user} is a member of {name}" + (f" (through {via})" if via != name else ""),
                    f"REVOKE {via} FROM {quoted}  -- it {ROLES[name]}",
                    "read-all-stats" if stats else "read-all-settings" if settings else None,
                )
            )
    return str(user), str(version), bool(rolsuper), found


def inspect_postgres(
    conn: Connection,
    allowed: frozenset[str] = frozenset(),
    identities: frozenset[str] = frozenset(),
    policy: FunctionPolicy | None = None,
) -> AccountReport:
    """Everything the role the calls run as must not hold, each with the SQL that removes it.

    Args:
        conn: A connection in a call's read-only session (after any SET ROLE).
        allowed: Opt-ins for functions and objects (`function:schema.name`, `extension:name`, ...).
        identities: Roles checked as identities of their own (`--role-map`): not inspected again
            as roles one SET ROLE away.
        policy: What admission lets queries call (`fnconfig`: functions whose own settings undo the
            call's; None: the dialect's default).
    """
    conn.execute(text("SET LOCAL search_path = pg_catalog"))  # names in fixes come out qualified
    user, version, rolsuper, found = _role_findings(conn)
    rows = conn.execute(text(_OWNED.format(reach=reaches(conn, "current_user", "c.relowner")))).all()
    if rows:
        owned = [str(r[0]) for r in rows]
        shown = ", ".join(owned[:5]) + (f" and {len(owned) - 5} more" if len(owned) > 5 else "")
        vias = sorted({str(via) for _, via in rows if via is not None})
        fix = "connect as a reader role that owns nothing (`mcpkit sql grant` prints one)"
        if vias:  # owned by a role it is a member of: SET ROLE (INHERIT or not) makes it the owner
            quoted = conn.execute(text("SELECT quote_ident(current_user)")).scalar()
            memberships = f"REVOKE {', '.join(vias)} FROM {quoted}"
            fix = memberships if all(v is not None for _, v in rows) else f"{memberships}; {fix}"
        found.append(
            Finding(
                "table-owner",
                f"role {user} owns {shown}, or can SET ROLE to a role that does (an owner can bypass"
                " row-level security and change what it reads)",
                fix,
                "table-owner",
            )
        )
    found += _granted_findings(conn, allowed)
    found += config_findings(conn, allowed, policy, custom=True)  # rt21 F7, rtg F2
    found += OptIns.read(conn, allowed).ambiguous()  # rt23 F4
    if not rolsuper:  # the rights of a role one SET ROLE away count as the role's own
        skip = sorted({*ROLES, *identities})
        found += switched_findings(conn, lambda c: _granted_findings(c, allowed), [*found], skip)
    writable = [str(r[0]) for r in conn.execute(text(_WRITABLE))]
    reason = "rolsuper" if rolsuper else next((f.code for f in found if f.code.startswith("pg_")), None)
    return AccountReport("postgres", version, user, reason is not None, reason, writable, True, found)


def _granted_findings(conn: Connection, allowed: frozenset[str]) -> list[Finding]:
    """What the current role holds by grants rather than by membership or attribute: CREATE,
    foreign tables, parameter grants, routes to hazardous functions, views read with their owner's
    rights."""
    user, quoted = conn.execute(text("SELECT current_user, quote_ident(current_user)")).one()
    found: list[Finding] = []
    for schema, grantees, owner in conn.execute(text(_CREATE)):
        fix = (
            f"ALTER SCHEMA {schema} OWNER TO <another role>"
            if owner
            else f"REVOKE CREATE ON SCHEMA {schema} FROM {grantees or quoted}"
        )
        found.append(
            Finding("create-schema", f"role {user} can CREATE in schema {schema}", fix, "create-schema")
        )
    for name, qualified, server, wrapper in conn.execute(text(_FOREIGN)):
        if f"foreign-table:{name}" in allowed:
            continue
        found.append(
            Finding(
                "foreign-table",
                f"role {user} can read foreign table {qualified} (server {server}, {wrapper}): "
                "each read reaches outside this database",
                f"REVOKE SELECT ON {qualified} FROM {quoted}",
                f"foreign-table:{name}",
            )
        )
    found += server_findings(conn, str(user), str(quoted), allowed)  # rtJ F3
    for database, grantees, owner in conn.execute(text(_CREATE_DATABASE)):
        fix = (
            f"ALTER DATABASE {database} OWNER TO <another role>"
            if owner
            else f"REVOKE CREATE ON DATABASE {database} FROM {grantees or quoted}"
        )
        found.append(
            Finding(
                "create-database",
                f"role {user} can CREATE schemas in database {database} (and own what it creates there)",
                fix,
                "create-schema",
            )
        )
    found += _parameter_findings(conn, user, allowed)
    found += audit_routes(conn, allowed)
    found += owner_views(conn, allowed)
    found += rls_parents(conn, allowed)
    return found


def _parameter_findings(conn: Connection, user: str, allowed: frozenset[str]) -> list[Finding]:
    if conn.dialect.server_version_info and conn.dialect.server_version_info < (15,):
        return []  # parameter privileges are PostgreSQL 15+
    found = []
    for name, privileges, grantees in conn.execute(text(_PARAMETERS)):
        if f"parameter:{name}" in allowed:
            continue
        fix = "; ".join(
            f"REVOKE {privilege} ON PARAMETER {name} FROM {grantee}"
            for privilege in privileges.split(", ")
            for grantee in grantees.split(", ")
        )
        found.append(
            Finding(
                "parameter-grant",
                f"role {user} holds {privileges} on parameter {name}, a setting only a superuser may change",
                fix,
                f"parameter:{name}",
            )
        )
    return found


TEMP_FILE_LIMIT: Final = "1GB"
"""What `mcpkit sql grant` sets as the reader's `temp_file_limit` (a superuser-only setting)."""
_TEMP_FILE_LIMIT: Final = "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'temp_file_limit'"

_CONNECTION_LIMIT: Final = (
    "SELECT session_user, quote_ident(session_user), rolconnlimit, rolsuper FROM pg_catalog.pg_roles"
    " WHERE rolname = session_user"
)


def connection_limit_warnings(conn: Connection, budget: ConnectionBudget) -> list[Finding]:
    """The login's CONNECTION LIMIT (`rolconnlimit` of `session_user`, readable by every login)
    against what the server opens: told, not refused.

    A statement that ignores its timeout and cancel (LIKE over a long pattern) keeps its backend
    after the call; the limit bounds how many do. Not required at start-up: existing deployments
    log in without one, and a superuser ignores the limit anyway.
    """
    who, quoted, limit, superuser = conn.execute(text(_CONNECTION_LIMIT)).one()
    why = "a statement that ignores its timeout and cancel keeps its backend busy after its call"
    message = budget.judge(str(who), int(limit), why, "cancel request")
    if message is None:
        return []
    if superuser:
        message += "; it is a superuser, which PostgreSQL lets past any connection limit"
    fix = f"ALTER ROLE {quoted} CONNECTION LIMIT {budget.recommended}"
    return [Finding("postgres:connection-limit", message, fix)]


LOG_MIN_MESSAGES: Final = "log"
"""What `mcpkit sql grant` sets as the reader's `log_min_messages` (a superuser-only setting): above
ERROR, so the server's log keeps no error of the reader's calls (mcpkit's own log keeps each, clipped)."""
_QUIET_LEVELS: Final = frozenset({"log", "fatal", "panic"})


def error_log_warnings(conn: Connection) -> list[Finding]:
    """The role's `log_min_messages`: at ERROR or below, each failed call's error goes to the server's
    log, and an input function's error quotes its whole input (red team pg14 F9: one call of
    `repeat('x', 200000000)::int` wrote 200 MB there; repeated, it fills the host's disk, which no
    limit of the call bounds). Told, not refused: only a superuser can set it."""
    level = str(conn.execute(text("SELECT current_setting('log_min_messages')")).scalar()).lower()
    if level in _QUIET_LEVELS:
        return []
    who, quoted = conn.execute(text("SELECT session_user, quote_ident(session_user)")).one()
    message = (
        f"{who}'s failed calls write their error text to the server's log (log_min_messages {level});"
        " an input function's error quotes its whole input, so calls can fill the database host's disk"
    )
    return [
        Finding(
            "postgres:error-log", message, f"ALTER ROLE {quoted} SET log_min_messages = '{LOG_MIN_MESSAGES}'"
        )
    ]


def temp_file_warnings(conn: Connection) -> list[Finding]:
    """The role's `temp_file_limit`: without one, a call's sort or hash may fill the database
    host's disk until its timeout (one sort of a generated set wrote 4.6 GB in 30 s). Told, not
    refused: only a superuser can set it (`ALTER ROLE ... SET`), which `mcpkit sql grant` prints."""
    if str(conn.execute(text(_TEMP_FILE_LIMIT)).scalar()) != "-1":
        return []
    who, quoted = conn.execute(text("SELECT session_user, quote_ident(session_user)")).one()
    message = f"{who} may write unlimited temporary files per query (temp_file_limit -1)"
    return [
        Finding(
            "postgres:temp-file-limit",
            message,
            f"ALTER ROLE {quoted} SET temp_file_limit = '{TEMP_FILE_LIMIT}'",
        )
    ]
