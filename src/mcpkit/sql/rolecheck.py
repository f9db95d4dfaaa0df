"""The role map's isolation checks, inside one session: at start-up and again while serving.

Generic: the database's profile answers (`Profile.switches_roles`, `login_problems`,
`shared_login_problems`, `role_setup`; PostgreSQL's queries are in `profiles.postgres.roles`), and
where roles cannot switch (a login per role) there is nothing to check here.

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

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection

from mcpkit.sql.errors import SqlConfigError

if TYPE_CHECKING:
    from mcpkit.sql.engines.engine import SqlEngine
    from mcpkit.sql.identities import IdentityRouter, RoleMap
    from mcpkit.sql.profiles.base import Profile
    from mcpkit.sql.reverify import Verify
    from mcpkit.sql.service import Masking

__all__ = [
    "guard_roles",
    "login_isolation",
    "login_verify",
    "role_problems",
    "shared_verify",
    "verify_roles",
]


def login_isolation(
    profile: Profile,
    conn: Connection,
    role: str,
    user: str,
    others: Collection[str],
    account: str,
    *,
    warn: bool = False,
) -> None:
    """As `role`'s login (`user`): it reaches neither another principal's login nor the server's
    account (`Profile.login_problems`; `warn`: also log what is allowed but worth knowing, at
    start-up).

    Raises:
        SqlConfigError: what it reaches, with the REVOKE that ends it.
    """
    problems = profile.login_problems(conn, role, user, sorted(others), account, warn=warn)
    if problems:
        raise SqlConfigError(problems[0])


def login_verify(role: str, user: str, others: Collection[str], account: str) -> Verify:
    """`login_isolation` as a while-serving check of `role`'s login."""
    frozen = tuple(others)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        login_isolation(engine.profile, conn, role, user, frozen, account)

    return verify


def role_problems(profile: Profile, conn: Connection, roles: Collection[str]) -> list[str]:
    """As the server's account (shared login): one sentence per problem (empty: fine; none where
    the database does not switch roles)."""
    return profile.shared_login_problems(conn, roles) if profile.switches_roles else []


def shared_verify(roles: Collection[str], setup: str | None) -> Verify:
    """While serving, shared login: `role_problems` as the account, then `setup` (its `SET LOCAL
    ROLE`, undone with the verification's savepoint), so the checks after it run as the role."""
    frozen = frozenset(roles)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        problems = role_problems(engine.profile, conn, frozen)
        if problems:
            raise SqlConfigError("role map: " + "; ".join(problems))
        if setup:
            conn.exec_driver_sql(setup)

    return verify


def verify_roles(engine: SqlEngine, roles: RoleMap) -> list[str]:
    """Start-up checks of `--allow shared-login`, where the database switches roles: `role_problems`
    for every mapped role; none elsewhere.

    Returns:
        One sentence per problem (empty: fine).
    """
    if not engine.profile.switches_roles:
        return []
    with engine.session(10.0, "verify-roles") as (conn, _):
        return role_problems(engine.profile, conn, roles.roles)


def guard_roles(
    router: IdentityRouter,
    account: Verify,
    masked: Mapping[str, Mapping[str, frozenset[str]]],
    masking: Masking | None = None,
    allow: Collection[str] = (),
) -> None:
    """While serving, each role's calls verify again what start-up verified for it, in one session
    (`router.serving`): its isolation (`IdentityRouter.isolation`; a shared login also sets the
    role), its masks (`masked`: role -> masked tables) and the order of its views (`masking`,
    `allow`: `maskcheck.order_check`), its tables and columns against those it saw at start-up
    (`relcheck`), the scan-pin findings of the masked tables it can read (`scanpins.pin_findings_check`,
    also at start-up, naming the role), the least-privilege check as it (`account`). With a shared
    login, the account's own calls (stdio) re-run `role_problems` too."""
    from mcpkit.sql.maskcheck import masks_check, order_check
    from mcpkit.sql.relcheck import relations_check, startup_relations
    from mcpkit.sql.reverify import all_of
    from mcpkit.sql.scanpins import pin_findings_check

    seen = {r: startup_relations(e) for r, e in router.identities()} if masking and masking.relations else {}
    if masking is not None:  # what a role's re-verification refuses refuses start-up, naming the role
        for role, engine in router.identities():
            if role in masked:
                with engine.session(30.0, "startup-masks") as (conn, _):
                    try:
                        pin_findings_check(masking.schema, masked[role], allow)(engine, conn)
                    except SqlConfigError as exc:
                        raise SqlConfigError(f"role {role}: {exc}") from None

    def for_role(role: str) -> Verify:
        readers = masking.policy.readers if masking is not None else None
        masks = masks_check(masked[role], readers) if role in masked else None
        order = same = pins = None
        if masking is not None and role in masked:
            order = order_check(masking.policy, masking.schema, masked[role], allow)
            same = relations_check(masking, seen.get(role)) if seen.get(role) is not None else None
            pins = pin_findings_check(masking.schema, masked[role], allow, masking.masked)  # rtd F1
        return all_of(router.isolation(role), same, masks, order, pins, account)  # masks: before its path

    router.serving = for_role
    roles = router.roles.roles
    if (
        router.base.guard is not None
        and router.base.profile.switches_roles
        and roles - set(router.roles.logins)
    ):
        router.base.guard.first(shared_verify(roles, None))
