"""MariaDB roles granted to the login: what each brings, read by enabling it in turn.

A login with no access to the `mysql` schema cannot read another role's grants (`SHOW GRANTS FOR
role` is refused) and `information_schema` shows only what the session's current role brings:
`USER_PRIVILEGES` and `SCHEMA_PRIVILEGES` list the login's own grants, `ROUTINES` and `VIEWS` only
what the login and its enabled role reach. A role granted to the login but not enabled (not its
default role) is one `SET ROLE` away, and a role granted to that role comes with it. So each role
granted to the login is enabled in turn (`SET ROLE r`; a nested role cannot be enabled by itself),
and the session's `CURRENT_ROLE()` is put back after, also on error. `SET ROLE` is not undone by a
rollback nor by `COM_RESET_CONNECTION`: when the role cannot be put back, `RoleNotRestored` (not a
driver error) makes the engine drop the connection instead of pooling it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from mcpkit.sql.errors import SessionLost

__all__ = ["RoleNotRestored", "granted_roles", "quote_name", "rows_under_any_role", "under_each_role"]

log = logging.getLogger("mcpkit.sql")

Rows = Sequence[tuple[Any, ...]]

# `GRANT `r1`, `r2` TO `user`@`host``: roles granted to the login (a role granted to a role, as
# SHOW GRANTS lists it under an enabled role, names no host).
_ROLE_GRANT: Final = re.compile(r"GRANT ((?:`(?:[^`]|``)+`(?:, )?)+) TO `(?:[^`]|``)+`@")
_NAME: Final = re.compile(r"`((?:[^`]|``)+)`")


class RoleNotRestored(SessionLost):
    """The session's role could not be put back after reading what the granted roles bring."""


def quote_name(name: str) -> str:
    """A role or user name as a backquoted identifier.

    >>> quote_name("a`b")
    '`a``b`'
    """
    return "`" + name.replace("`", "``") + "`"


def granted_roles(show_grants: Sequence[str]) -> list[str]:
    """The roles granted to the login itself, from its `SHOW GRANTS` lines.

    >>> granted_roles(["GRANT `r`, `s``t` TO `u`@`%`", "GRANT `n` TO `r`", "GRANT USAGE ON *.* TO `u`@`%`"])
    ['r', 's`t']
    """
    return [
        name.replace("``", "`")
        for line in show_grants
        if (m := _ROLE_GRANT.match(line))
        for name in _NAME.findall(m[1])
    ]


def under_each_role(
    run: Callable[[str], Rows], roles: Sequence[str], queries: Sequence[str]
) -> list[tuple[str, list[Rows]]]:
    """The queries' rows with each of `roles` enabled in turn (its nested roles with it).

    A role that cannot be enabled (dropped meanwhile) is skipped. The session's role is put back
    exactly after, also when a query fails (that error is raised after).

    Args:
        run: Runs one statement in the session and returns its rows.
        roles: Roles granted to the login (`granted_roles`).
        queries: Read under each role.

    Raises:
        RoleNotRestored: the session's previous role could not be put back.
    """
    if not roles:
        return []
    previous = run("SELECT CURRENT_ROLE()")[0][0]
    out: list[tuple[str, list[Rows]]] = []
    try:
        for role in roles:
            try:
                run(f"SET ROLE {quote_name(role)}")
            except Exception as exc:  # not enabled: it brings nothing to this session
                log.info("role %s granted to the login cannot be enabled (skipped): %s", role, exc)
                continue
            out.append((role, [run(q) for q in queries]))
    finally:
        back = quote_name(str(previous)) if previous is not None else "NONE"
        try:
            run(f"SET ROLE {back}")
            now = run("SELECT CURRENT_ROLE()")[0][0]
        except Exception as exc:
            raise RoleNotRestored(f"the session's role {previous!r} could not be put back: {exc}") from exc
        if now != previous:
            raise RoleNotRestored(f"the session's role is {now!r}, not {previous!r} as before")
    return out


def rows_under_any_role(run: Callable[[str], Rows], query: str) -> list[tuple[Any, ...]]:
    """`query`'s rows as the session is, then under each role granted to the login (`under_each_role`)."""
    rows = list(run(query))
    roles = granted_roles([str(r[0]) for r in run("SHOW GRANTS")])
    for _, (listed,) in under_each_role(run, roles, [query]):
        rows += listed
    return rows
