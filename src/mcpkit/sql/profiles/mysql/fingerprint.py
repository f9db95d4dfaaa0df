"""MySQL and MariaDB's catalog fingerprint: what a change by an administrator touches (`reverify`)."""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from mcpkit.sql.profiles.digest import digest, fetch
from mcpkit.sql.profiles.mysql.roles import granted_roles, under_each_role

__all__ = ["mysql_fingerprint"]

_SEEN: Final = (
    "SELECT CONCAT_WS('/', "
    "(SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT_WS(',', ROUTINE_SCHEMA, ROUTINE_NAME, "
    "SECURITY_TYPE, DEFINER, LAST_ALTERED, IS_DETERMINISTIC, SQL_DATA_ACCESS) ORDER BY ROUTINE_SCHEMA, "
    "ROUTINE_NAME)), '')) FROM information_schema.ROUTINES), "
    "(SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT_WS(',', TABLE_SCHEMA, TABLE_NAME, "
    "SECURITY_TYPE, DEFINER, MD5(VIEW_DEFINITION)) ORDER BY TABLE_SCHEMA, TABLE_NAME)), '')) "
    "FROM information_schema.VIEWS), "
    "CURRENT_USER(), CURRENT_ROLE())"
)


def mysql_fingerprint(dbapi: Any) -> str:
    """The account's `SHOW GRANTS` and the routines (with their SQL SECURITY and last change) and
    views (with their definitions, where readable) it can see: as the session is, then under each
    role granted to the login, enabled or not (`roles.under_each_role`: a FILE granted to a role of
    a role that is not enabled changes it)."""
    run = partial(fetch, dbapi)
    grants = run("SHOW GRANTS")
    rows: list[object] = [grants, run(_SEEN)]
    for role, seen in under_each_role(
        run, granted_roles([str(g[0]) for g in grants]), ("SHOW GRANTS", _SEEN)
    ):
        rows += [[(role,)], *seen]
    return digest(rows)
