"""The role map's isolation checks (PostgreSQL), inside one session: at start-up and again while serving.

One login per role: no login may be a member of another mapped role's login (so neither `SET ROLE`
nor `set_config('role', ...)` nor an inherited grant reaches another principal's rows), nor of the
server's own account. `--allow shared-login`: every role exists, cannot bypass row-level security,
the server's account may switch to it and does not inherit its rights, and, after its `SET ROLE`,
no mapped role is a member of another principal's role (whose grants it would inherit).

While serving (`mcpkit.sql.reverify`), each mapped role's calls run its own checks: a failure
refuses the calls of that role's principals only (one login per role), or, with a shared login,
every role's calls (each role's check runs the whole shared-login check: one account switches to
them all).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import quote_role

if TYPE_CHECKING:
    from mcpkit.sql.engines.engine import SqlEngine
    from mcpkit.sql.identities import IdentityRouter, RoleMap
    from mcpkit.sql.reverify import Verify

__all__ = [
    "guard_roles",
    "login_isolation",
    "login_verify",
    "role_problems",
    "shared_verify",
    "verify_roles",
]

log = logging.getLogger("mcpkit.sql")

_SWITCH: Final = (
    "SELECT r.rolname FROM pg_roles r WHERE r.rolname = ANY(:others)"
    " AND pg_has_role(current_user, r.oid, 'MEMBER') ORDER BY 1"
)
# The server's own account (the DSN's login), reached from a per-principal login: its grants and
# the row-level security policies written for it would apply to the principal too.
_ACCOUNT_MEMBER: Final = (
    "SELECT pg_has_role(current_user, r.oid, 'MEMBER') FROM pg_roles r"
    " WHERE r.rolname = :account AND r.rolname <> current_user"
)
# Other roles the login belongs to that row-level security policies are written for: the login's
# principals see what those policies admit (warned, not refused: a group role may be meant).
_POLICY_ROLES: Final = (
    "SELECT DISTINCT r.rolname, n.nspname || '.' || c.relname FROM pg_policy p"
    " JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
    " JOIN pg_roles r ON r.oid = ANY(p.polroles)"
    " WHERE r.rolname <> current_user AND pg_has_role(current_user, r.oid, 'MEMBER') ORDER BY 1, 2"
)


def login_isolation(
    conn: Connection, role: str, user: str, others: Collection[str], account: str, *, warn: bool = False
) -> None:
    """As `role`'s login (`user`): it reaches neither another principal's login nor the server's
    account (`warn`: also log the policy roles it belongs to, at start-up).

    Raises:
        SqlConfigError: what it reaches, with the REVOKE that ends it.
    """
    reach = conn.execute(text(_SWITCH), {"others": sorted(others)}).scalars().all()
    member = conn.execute(text(_ACCOUNT_MEMBER), {"account": account}).scalar()
    for group, table in conn.execute(text(_POLICY_ROLES)).all() if warn else ():
        log.warning(
            "role map: the login of %s is a member of %s, which a row-level security "
            "policy on %s is written for: its principals see the rows that policy admits",
            role,
            group,
            table,
        )
    if reach:
        raise SqlConfigError(
            f"role map: the login of {role} can switch to {reach[0]}, another principal's "
            f"role: REVOKE {quote_role(reach[0])} FROM {quote_role(user)}"
        )
    if member:
        raise SqlConfigError(
            f"role map: the login of {role} is a member of the server's account "
            f"{account}, so its grants and row-level security policies apply to "
            f"{role}'s principals too: REVOKE {quote_role(account)} FROM "
            f"{quote_role(user)} (and grant the login what it needs itself)"
        )


def login_verify(role: str, user: str, others: Collection[str], account: str) -> Verify:
    """`login_isolation` as a while-serving check of `role`'s login."""
    frozen = tuple(others)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        login_isolation(conn, role, user, frozen, account)

    return verify


def role_problems(conn: Connection, roles: Collection[str]) -> list[str]:
    """As the server's account (shared login): one sentence per problem (empty: fine)."""
    problems = []
    inherits = conn.execute(text("SELECT rolinherit FROM pg_roles WHERE rolname = current_user")).scalar()
    if inherits:
        problems.append(
            "the server's account inherits its roles' rights: make it NOINHERIT, so a call "
            "without SET ROLE sees nothing"
        )
    for role in sorted(roles):
        row = conn.execute(
            text(
                "SELECT rolsuper, rolbypassrls, pg_has_role(current_user, oid, 'MEMBER')"
                " FROM pg_roles WHERE rolname = :r"
            ),
            {"r": role},
        ).first()
        if row is None:
            problems.append(f"role {role} does not exist")
        elif row[0] or row[1]:
            problems.append(f"role {role} bypasses row-level security (superuser or BYPASSRLS)")
        elif not row[2]:
            problems.append(f"the server's account is not a member of role {role}, so it cannot SET ROLE")
    return problems


def shared_verify(roles: Collection[str], setup: str | None) -> Verify:
    """While serving, shared login: `role_problems` as the account, then `setup` (its `SET LOCAL
    ROLE`, undone with the verification's savepoint), so the checks after it run as the role."""
    frozen = frozenset(roles)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        problems = role_problems(conn, frozen)
        if problems:
            raise SqlConfigError("role map: " + "; ".join(problems))
        if setup:
            conn.exec_driver_sql(setup)

    return verify


def verify_roles(engine: SqlEngine, roles: RoleMap) -> list[str]:
    """Start-up checks on PostgreSQL (`--allow shared-login`): `role_problems` for every mapped role.

    Returns:
        One sentence per problem (empty: fine).
    """
    if engine.dialect != "postgres":
        return []
    with engine.session(10.0, "verify-roles") as (conn, _):
        return role_problems(conn, roles.roles)


def guard_roles(
    router: IdentityRouter, account: Verify, masked: Mapping[str, Mapping[str, frozenset[str]]]
) -> None:
    """While serving, each role's calls verify again what start-up verified for it, in one session
    (`router.serving`): its isolation (`IdentityRouter.isolation`; a shared login also sets the
    role), its masks (`masked`: role -> masked tables), the least-privilege check as it
    (`account`). With a shared login, the account's own calls (stdio) re-run `role_problems` too."""
    from mcpkit.sql.maskcheck import masks_check
    from mcpkit.sql.reverify import all_of

    def for_role(role: str) -> Verify:
        masks = masks_check(masked[role]) if role in masked else None
        return all_of(router.isolation(role), masks, account)  # masks: before its search_path

    router.serving = for_role
    roles = router.roles.roles
    if (
        router.base.guard is not None
        and router.base.dialect == "postgres"
        and roles - set(router.roles.logins)
    ):
        router.base.guard.first(shared_verify(roles, None))
