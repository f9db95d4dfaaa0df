"""PostgreSQL's role switching under a role map: the shared account's roles, each login's reach."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import quote_role
from mcpkit.sql.profiles.postgres.membership import can_set, per_grant, reaches
from mcpkit.sql.profiles.postgres.switch import switched_reads

__all__ = ["login_problems", "shared_login_problems"]

log = logging.getLogger("mcpkit.sql")

# {reach}: `membership.reaches` (inherits the role's rights, can SET ROLE to it or grant it).
_SWITCH: Final = "SELECT r.rolname FROM pg_roles r WHERE r.rolname = ANY(:others) AND {reach} ORDER BY 1"
# The server's own account (the DSN's login), reached from a per-principal login: its grants and
# the row-level security policies written for it would apply to the principal too.
_ACCOUNT_MEMBER: Final = (
    "SELECT {reach} FROM pg_roles r WHERE r.rolname = :account AND r.rolname <> current_user"
)
# Other roles the login belongs to that row-level security policies are written for: the login's
# principals see what those policies admit (warned, not refused: a group role may be meant).
_POLICY_ROLES: Final = (
    "SELECT DISTINCT r.rolname, n.nspname || '.' || c.relname FROM pg_policy p"
    " JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
    " JOIN pg_roles r ON r.oid = ANY(p.polroles)"
    " WHERE r.rolname <> current_user AND pg_has_role(current_user, r.oid, 'MEMBER') ORDER BY 1, 2"
)
_ROLE: Final = "SELECT rolsuper, rolbypassrls, {can_set} FROM pg_roles r WHERE rolname = :r"
# PostgreSQL 16+: whether a member inherits is each grant's INHERIT option (`rolinherit` is only the
# default of new grants): the account's direct grants that give it their role's rights.
_INHERITED: Final = (
    "SELECT quote_ident(g.rolname), quote_ident(current_user) FROM pg_auth_members m"
    " JOIN pg_roles g ON g.oid = m.roleid"
    " WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND m.inherit_option"
    " ORDER BY 1"
)


def login_problems(
    conn: Connection, role: str, user: str, others: Sequence[str], account: str, *, warn: bool = False
) -> list[str]:
    """What a principal's own login (`conn` runs as `user`, or as a shared login's role after its
    SET ROLE) reaches: another principal's login among `others`, or the server's `account`.
    `warn` (start-up): the policies written for its other roles are logged."""
    reaching = reaches(conn, "current_user", "r.oid")
    reach = conn.execute(text(_SWITCH.format(reach=reaching)), {"others": list(others)}).scalars().all()
    member = conn.execute(text(_ACCOUNT_MEMBER.format(reach=reaching)), {"account": account}).scalar()
    for group, table in conn.execute(text(_POLICY_ROLES)).all() if warn else ():
        log.warning(
            "role map: the login of %s is a member of %s, which a row-level security "
            "policy on %s is written for: its principals see the rows that policy admits",
            role,
            group,
            table,
        )
    problems = []
    if reach:
        problems.append(
            f"role map: the login of {role} can switch to {reach[0]}, another principal's "
            f"role: REVOKE {quote_role(reach[0])} FROM {quote_role(user)}"
        )
    switched = switched_reads(conn)
    if switched:  # red team mask17 F6: another tenant's table one SET ROLE away
        group, via, table = switched
        problems.append(
            f"role map: the login of {role} can SET ROLE to {group} (a member of it, INHERIT or not),"
            f" which reads {table} that the login itself cannot: REVOKE {via} FROM {quote_role(user)}"
        )
    if member:
        problems.append(
            f"role map: the login of {role} is a member of the server's account "
            f"{account}, so its grants and row-level security policies apply to "
            f"{role}'s principals too: REVOKE {quote_role(account)} FROM "
            f"{quote_role(user)} (and grant the login what it needs itself)"
        )
    return problems


def shared_login_problems(conn: Connection, roles: Collection[str]) -> list[str]:
    """Each role exists, cannot bypass row-level security, and the server's account (`conn`) may
    switch to it; the account itself should not inherit the roles' rights."""
    problems = []
    if per_grant(conn):
        inherited = conn.execute(text(_INHERITED)).all()
        if inherited:
            problems.append(
                f"the server's account inherits the rights of {', '.join(g for g, _ in inherited)}"
                " (granted WITH INHERIT TRUE), so a call without SET ROLE sees what they see: "
                + "; ".join(f"REVOKE INHERIT OPTION FOR {g} FROM {a}" for g, a in inherited)
            )
    elif conn.execute(text("SELECT rolinherit FROM pg_roles WHERE rolname = current_user")).scalar():
        problems.append(
            "the server's account inherits its roles' rights: make it NOINHERIT, so a call "
            "without SET ROLE sees nothing"
        )
    check = _ROLE.format(can_set=can_set(conn, "current_user", "r.oid"))
    for role in sorted(roles):
        row = conn.execute(text(check), {"r": role}).first()
        if row is None:
            problems.append(f"role {role} does not exist")
        elif row[0] or row[1]:
            problems.append(f"role {role} bypasses row-level security (superuser or BYPASSRLS)")
        elif not row[2]:
            problems.append(f"the server's account is not a member of role {role}, so it cannot SET ROLE")
    return problems
