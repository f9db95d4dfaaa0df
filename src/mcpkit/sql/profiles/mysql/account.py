"""MySQL and MariaDB: who the login is and what it must not hold."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.profiles.base import AccountReport, ConnectionBudget, Finding
from mcpkit.sql.profiles.mysql.catalog_reads import SYSTEM_NAMES, catalog_read
from mcpkit.sql.profiles.mysql.generated import VIRTUAL_COLUMNS, virtual_column_findings
from mcpkit.sql.profiles.mysql.mask_routes import VIEW_CALLS
from mcpkit.sql.profiles.mysql.privileges import judge_grants
from mcpkit.sql.profiles.mysql.roles import granted_roles, quote_name, under_each_role
from mcpkit.sql.profiles.mysql.temp_space import temp_space_findings
from mcpkit.sql.profiles.mysql.views import VIEW_BODIES, ViewBodies, collect_bodies, view_body_findings

__all__ = ["connection_limit_findings", "inspect_mysql"]

# Global privileges that reach past one database's data: files, users, sessions, server state.
_ADMIN: Final[dict[str, str]] = {
    "FILE": "reads and writes files on the database host (LOAD_FILE, INTO OUTFILE)",
    "SUPER": "is an administrator (kills sessions, changes global settings, skips read_only)",
    "ALL PRIVILEGES": "holds every privilege",
    "PROCESS": "sees every session's SQL text, literals included",
    "CREATE USER": "creates and changes accounts",
    "SHUTDOWN": "stops the server",
    "RELOAD": "flushes logs, caches and privileges",
    "READ_ONLY ADMIN": "writes even when the server is read-only",
    "SYSTEM_VARIABLES_ADMIN": "changes global settings",
    "CONNECTION ADMIN": "kills other sessions",
    "CONNECTION_ADMIN": "kills other sessions",
    "BINLOG ADMIN": "purges the binary log",
    "REPLICATION SLAVE ADMIN": "controls replication",
}
_OPT_IN: Final = {"SUPER": "superuser", "ALL PRIVILEGES": "superuser"}
_PRIVILEGES: Final[dict[str, str]] = {
    "global": "SELECT PRIVILEGE_TYPE, '*' FROM information_schema.USER_PRIVILEGES WHERE GRANTEE IN :g",
    "schema": "SELECT PRIVILEGE_TYPE, TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES"
    " WHERE GRANTEE IN :g",
    "table": "SELECT PRIVILEGE_TYPE, CONCAT(TABLE_SCHEMA, '.', TABLE_NAME)"
    " FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE IN :g",
}
# information_schema.ROUTINES lists the routines the login may execute (or alter): every DEFINER
# routine, and every INVOKER function or package (a view can call one; a procedure needs CALL).
_DEFINERS: Final = (
    "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, DEFINER, SECURITY_TYPE"
    " FROM information_schema.ROUTINES"
    " WHERE SECURITY_TYPE = 'DEFINER' OR ROUTINE_TYPE IN ('FUNCTION', 'PACKAGE')"
    " ORDER BY 1, 2"
)

# information_schema.VIEWS lists every view the login holds a privilege on, with its definer and
# SQL SECURITY, whoever created it (the definition itself needs SHOW VIEW).
_DEFINER_VIEWS: Final = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, DEFINER FROM information_schema.VIEWS"
    " WHERE SECURITY_TYPE = 'DEFINER' ORDER BY 1, 2"
)


_MAX_USER_CONNECTIONS: Final = re.compile(r"\bMAX_USER_CONNECTIONS (-?\d+)")
_GLOBAL_GRANT: Final = re.compile(r"GRANT (.+?) ON \*\.\* TO (\S+)")
_NAMES: Final = re.compile(r"`((?:[^`]|``)+)`")
_LISTED: Final = "SELECT 1 FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = :s AND ROUTINE_NAME = :n"
_OBJECT_GRANT: Final = re.compile(
    r"GRANT (.+?) ON ((?:FUNCTION |PROCEDURE |PACKAGE BODY |PACKAGE )?)"
    r"(\*\.\*|`(?:[^`]|``)+`\.(?:\*|`(?:[^`]|``)+`)) TO (\S+)"
)


def _global_holders(lines: Sequence[str]) -> dict[str, list[str]]:
    """Global privilege -> who holds it for this login: the login itself, or a role granted to it
    (directly or through other roles), as SHOW GRANTS writes them.

    information_schema.USER_PRIVILEGES lists the login's own grants only: a SUPER held through a
    role was not seen. `lines` are SHOW GRANTS of the session and under each granted role
    (`roles.under_each_role`: a role granted but not enabled is one SET ROLE away).
    """
    holders: dict[str, list[str]] = {}
    for line in lines:
        m = _GLOBAL_GRANT.match(line)
        if m is None:
            continue
        for privilege in (p.strip().upper() for p in m[1].split(",")):
            if m[2] not in holders.setdefault(privilege, []):
                holders[privilege].append(m[2])
    return holders


def _revokes(lines: Sequence[str], privilege: str, on: str, kind: str = "") -> list[str]:
    """The REVOKEs that take `privilege` on object `on` (db.name, each name backquoted), from SHOW GRANTS
    lines: granted on it, on its database or on everything, to the login, a role or PUBLIC.

    >>> _revokes(["GRANT SELECT, EXECUTE ON `d`.* TO `r`"], "EXECUTE", "`d`.`f`", "FUNCTION")
    ['REVOKE EXECUTE ON `d`.* FROM `r`']
    """
    found = []
    for line in lines:
        m = _OBJECT_GRANT.match(line)
        if m is None or m[2] not in ("", f"{kind} "):
            continue
        privileges = {p.strip().upper() for p in m[1].split(",")}
        if (privilege in privileges or "ALL PRIVILEGES" in privileges) and (
            m[3] in (on, "*.*") or on.startswith(m[3].removesuffix("*"))
        ):
            found.append(f"REVOKE {privilege} ON {m[2]}{m[3]} FROM {m[4]}")
    return list(dict.fromkeys(found))


def _grantees(conn: Connection, user: str, host: str) -> tuple[str, ...]:
    """The login and every role granted to it (MariaDB), as information_schema writes grantees."""
    roles = list(conn.execute(text("SELECT ROLE_NAME FROM information_schema.APPLICABLE_ROLES")).scalars())
    return (f"'{user}'@'{host}'", *(f"'{r}'" for r in roles), *(f"'{r}'@''" for r in roles))


def _same_account(definer: str, current: str) -> bool:
    """`user@host` as the catalog writes a definer, against CURRENT_USER() (host names fold case)."""
    d_user, _, d_host = definer.rpartition("@")
    c_user, _, c_host = current.rpartition("@")
    return d_user == c_user and d_host.casefold() == c_host.casefold()


Seen = dict[tuple[str, ...], str | None]
"""A DEFINER routine's or view's catalog row -> None if the session reaches it as it is, else the
granted role under which it was seen."""


def _definer_views(
    views: Seen, current: str, account: str, lines: Sequence[str], allowed: frozenset[str], bodies: ViewBodies
) -> list[Finding]:
    """A view that runs with another account's rights is a route around every other check.

    MariaDB checks a DEFINER view's tables, columns and functions against its definer: a view
    created by root reads mysql.user, calls LOAD_FILE, or runs a root routine the login may not
    execute (which may SET GLOBAL inside the read-only transaction). Its definition may be hidden
    from the login, so every such view is refused, not only those found to reach something. The
    fix offered is the REVOKE alone for one that reads a system schema: as SQL SECURITY INVOKER it
    would hand the catalog on to the reader (red team rt35b F2), which `--mask` refuses too.
    """
    found = []
    for (schema, name, definer), role in views.items():
        if _same_account(definer, current) or f"view:{schema}.{name}" in allowed:
            continue
        quoted = f"`{schema}`.`{name}`"
        revokes = _revokes(lines, "SELECT", quoted)
        wide = not revokes or any(r.split(" FROM ")[0].endswith("*") for r in revokes)
        revoke = "; ".join(revokes or [f"REVOKE SELECT ON {quoted} FROM {account}"])
        revoke += f" (a grant on `{schema}`.* must become grants per table)" if wide else ""
        via = f" through role {quote_name(role)}" if role is not None else ""
        body = bodies.get((schema, name), ("", None))[0]
        read = catalog_read(body) if body else None
        invoker = (
            f"ALTER SQL SECURITY INVOKER VIEW {quoted} AS <its SELECT, from SHOW CREATE VIEW {quoted}>,"
            f" if it reads no system schema ({SYSTEM_NAMES}); or "
        )
        fix = f"{revoke} (it reads {read}: as INVOKER it would hand the catalog to the reader)"
        found.append(
            Finding(
                "definer-view",
                f"{current} can read view {schema}.{name}{via}, which runs as its definer {definer}"
                " (SQL SECURITY DEFINER: its tables, columns and functions are checked against the definer)",
                fix if read is not None else invoker + revoke,
                f"view:{schema}.{name}",
            )
        )
    return found


def _public_routines(
    conn: Connection, lines: Sequence[str], current: str, allowed: frozenset[str]
) -> list[Finding]:
    """Routines granted to PUBLIC one by one: `information_schema.ROUTINES`, `SHOW FUNCTION STATUS`
    and `SHOW CREATE` hide them from the login (MariaDB 10.11), which may still run them, so their
    SQL SECURITY cannot be read and each one not listed otherwise is refused (a grant on `db.*` to
    PUBLIC lists its routines). Packages too (red team rt35b F4: `EXECUTE ON PACKAGE [BODY]`)."""
    found = []
    for line in dict.fromkeys(lines):  # each role repeats the PUBLIC lines
        m = _OBJECT_GRANT.match(line)
        if m is None or not m[2] or m[4] != "PUBLIC":
            continue
        privileges = {p.strip().upper() for p in m[1].split(",")}
        schema, name = (n.replace("``", "`") for n in _NAMES.findall(m[3]))
        if not privileges & {"EXECUTE", "ALL PRIVILEGES"} or f"routine:{schema}.{name}" in allowed:
            continue
        if conn.execute(text(_LISTED), {"s": schema, "n": name}).first() is not None:
            continue  # its SQL SECURITY is read like any other routine's
        kind = m[2].strip()
        found.append(
            Finding(
                "definer-routine",
                f"{current} can run {kind.lower()} {schema}.{name} (EXECUTE granted to PUBLIC), whose SQL"
                " SECURITY the login cannot read (information_schema.ROUTINES does not list it)",
                f"REVOKE EXECUTE ON {kind} {m[3]} FROM PUBLIC",
                f"routine:{schema}.{name}",
            )
        )
    return found


def _seen(conn: Connection, own: Sequence[str]) -> tuple[list[str], Seen, Seen, ViewBodies, Seen]:
    """SHOW GRANTS lines, DEFINER routines, DEFINER views, every view's definition and every VIRTUAL
    column: as the session is, then under each role granted to the login (`roles.under_each_role`)."""

    def run(sql: str) -> Sequence[tuple[Any, ...]]:
        result = conn.exec_driver_sql(sql)
        return [tuple(r) for r in result.all()] if result.returns_rows else []

    lines = list(own)
    routines: Seen = {tuple(map(str, r)): None for r in run(_DEFINERS)}
    views: Seen = {tuple(map(str, r)): None for r in run(_DEFINER_VIEWS)}
    virtual: Seen = {tuple(map(str, r)): None for r in run(VIRTUAL_COLUMNS)}
    bodies: ViewBodies = {}
    collect_bodies(bodies, run(VIEW_BODIES), None)
    for role, (grants, r_rows, v_rows, b_rows, c_rows) in under_each_role(
        run, granted_roles(own), ("SHOW GRANTS", _DEFINERS, _DEFINER_VIEWS, VIEW_BODIES, VIRTUAL_COLUMNS)
    ):
        lines += [str(g[0]) for g in grants]
        for row in r_rows:
            routines.setdefault(tuple(map(str, row)), role)
        for row in v_rows:
            views.setdefault(tuple(map(str, row)), role)
        for row in c_rows:
            virtual.setdefault(tuple(map(str, row)), role)
        collect_bodies(bodies, b_rows, role)
    return lines, routines, views, bodies, virtual


def inspect_mysql(
    conn: Connection, allowed: frozenset[str] = frozenset(), functions: FunctionPolicy | None = None
) -> AccountReport:
    """The login: server-wide privileges, DEFINER routines it can run, every other grant against
    the reader's allowlist (`privileges`), what it can write; held itself, through PUBLIC or
    through any role granted to it, enabled or not, nested or not.

    Args:
        conn: A connection in a call's read-only session.
        allowed: `routine:db.name` opt-ins for reviewed DEFINER routines.
        functions: The policy queries are admitted under, which view definitions must pass too
            (None: the dialect's default).
    """
    current, version = conn.execute(text("SELECT CURRENT_USER(), VERSION()")).one()
    user, _, host = str(current).rpartition("@")
    account = f"'{user}'@'{host}'"
    grantees = _grantees(conn, user, host)
    privileges = {
        scope: [(str(p), str(o)) for p, o in conn.execute(text(q).bindparams(g=grantees))]
        for scope, q in _PRIVILEGES.items()
    }
    own = [str(r[0]) for r in conn.exec_driver_sql("SHOW GRANTS")]
    lines, routines, views, bodies, virtual = _seen(conn, own)
    holders = _global_holders(lines)
    held = {p for p, _ in privileges["global"]} | set(holders)
    found = []
    for p, why in _ADMIN.items():
        if p not in held:
            continue
        sources = holders.get(p) or [account]
        roles = [s for s in sources if "@" not in s]
        via = f" through role {', '.join(roles)}" if roles else ""
        found.append(
            Finding(
                f"mysql:{p.lower()}",
                f"{current} holds {p}{via} (it {why})",
                "; ".join(f"REVOKE {p} ON *.* FROM {s}" for s in sources),
                _OPT_IN.get(p),
            )
        )
    schema_execute = {on for p, on in privileges["schema"] if p == "EXECUTE"}
    for (schema, name, kind, definer, security), role in routines.items():
        if f"routine:{schema}.{name}" in allowed:
            continue
        quoted = f"`{schema}`.`{name}`"
        if revokes := _revokes(lines, "EXECUTE", quoted, kind):
            fix = "; ".join(revokes)
        elif schema in schema_execute or "EXECUTE" in held:
            fix = f"REVOKE EXECUTE ON `{schema}`.* FROM {account}"
        else:
            fix = f"REVOKE EXECUTE ON {kind} {quoted} FROM {account}"
        via = f" through role {quote_name(role)}" if role is not None else ""
        if security != "DEFINER":  # red team my14 F2: a view called it, and it held GET_LOCK
            found.append(
                Finding(
                    "executable-routine",
                    f"{current} can run {kind.lower()} {schema}.{name}{via} (SQL SECURITY INVOKER), whose"
                    " body this check cannot read: it may take named locks, sleep or set session state,"
                    " which the read-only transaction does not stop, from any view that calls it (a DEFINER"
                    " view runs it with the view definer's rights)",
                    fix,
                    f"routine:{schema}.{name}",
                )
            )
            continue
        found.append(
            Finding(
                "definer-routine",
                f"{current} can run {kind.lower()} {schema}.{name}{via}, which runs as its definer {definer}"
                " (SQL SECURITY DEFINER)",
                f"{fix}; or ALTER {kind} {quoted} SQL SECURITY INVOKER{VIEW_CALLS}",
                f"routine:{schema}.{name}",
            )
        )
    found += _public_routines(conn, lines, str(current), allowed)
    found += _definer_views(views, str(current), account, lines, allowed, bodies)
    others = {(s, n) for s, n, d in views if not _same_account(d, str(current))}  # refused above
    found += view_body_findings(
        bodies,
        str(current),
        account,
        lambda quoted: _revokes(lines, "SELECT", quoted),
        lambda s, n: (s, n) in others or f"view:{s}.{n}" in allowed,
        lambda s, n: any(
            p == "SHOW VIEW" and o in ("*", s, f"{s}.{n}") for g in privileges.values() for p, o in g
        ),
        functions,
    )
    found += virtual_column_findings(  # rtJ F1/F2
        virtual.items(), str(current), account, lambda q: _revokes(lines, "SELECT", q), allowed, functions
    )
    superuser = "superuser" if held & {"SUPER", "ALL PRIVILEGES"} else None
    judged, writable = judge_grants(lines, str(current), set(_ADMIN), superuser)
    found += judged
    found += temp_space_findings(str(version), str(current))
    admin = sorted(held & set(_ADMIN))
    return AccountReport(
        "mysql", str(version), str(current), bool(admin), ", ".join(admin) or None, writable, True, found
    )


def connection_limit_findings(conn: Connection, budget: ConnectionBudget) -> list[Finding]:
    """The login's connection limit against what the server opens (`ConnectionBudget`).

    The server applies the account's `MAX_USER_CONNECTIONS` where set, else the global
    `max_user_connections` (0: none). The login reads its own account's with `SHOW CREATE USER
    CURRENT_USER` (`mysql.user` needs SELECT on the mysql schema; `@@SESSION.max_user_connections`
    holds it only until the pool's `COM_RESET_CONNECTION` puts the global value back).
    """
    current, overall = conn.execute(text("SELECT CURRENT_USER(), @@GLOBAL.max_user_connections")).one()
    created = " ".join(str(r[0]) for r in conn.exec_driver_sql("SHOW CREATE USER CURRENT_USER"))
    own = _MAX_USER_CONNECTIONS.search(created)
    limit = int(own[1]) if own is not None and int(own[1]) != 0 else int(overall or 0)
    user, _, host = str(current).rpartition("@")
    fix = f"ALTER USER '{user}'@'{host}' WITH MAX_USER_CONNECTIONS {budget.recommended}"
    why = "a statement that ignores its timeout holds a server thread after its call"
    message = budget.judge(str(current), limit, why, "KILL")
    if message is None:
        return []
    return [Finding("mysql:connection-limit", message, fix, "connection-limit")]
