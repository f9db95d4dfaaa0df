"""PostgreSQL foreign servers the role may use: their options and its user mappings' (red team rtJ F3).

USAGE on a foreign server (granted, through a role, to PUBLIC, or as its owner) shows the server's
options (`host`, `dbname`, ...) in `information_schema.foreign_server_options` and the options of
the role's own user mapping (`user`, `password`) in `information_schema.user_mapping_options`: a
careless `GRANT USAGE ON FOREIGN SERVER` served the remote password to `execute_query`. Reading a
foreign table needs no USAGE on its server (SELECT on the table; checked on 15: without USAGE the
read went on to connect), so the finding costs a `foreign-table:` reader nothing.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding

__all__ = ["server_findings"]

_USABLE: Final = """
SELECT quote_ident(s.srvname), s.srvname, pg_has_role(s.srvowner, 'USAGE'),
  coalesce((SELECT string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
       ELSE quote_ident(a.grantee::regrole::text) END, ', ')
     FROM aclexplode(coalesce(s.srvacl, acldefault('S', s.srvowner))) a
     WHERE a.privilege_type = 'USAGE' AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE'))), ''),
  (SELECT count(*) FROM pg_catalog.pg_user_mappings u WHERE u.srvid = s.oid)
FROM pg_catalog.pg_foreign_server s WHERE has_server_privilege(s.oid, 'USAGE') ORDER BY 2
"""


def server_findings(conn: Connection, user: str, quoted: str, allowed: frozenset[str]) -> list[Finding]:
    """One finding per foreign server the current role may use, with the REVOKE (or, owned through
    a membership, the ownership change) that hides its options; opt-in `foreign-server:NAME`."""
    found = []
    for shown, name, owner, grantees, mappings in conn.execute(text(_USABLE)):
        if f"foreign-server:{name}" in allowed:
            continue
        fix = (
            f"ALTER SERVER {shown} OWNER TO <another role>"
            if owner
            else f"REVOKE USAGE ON FOREIGN SERVER {shown} FROM {grantees or quoted}"
        )
        found.append(
            Finding(
                "foreign-server",
                f"role {user} can use foreign server {shown}: information_schema shows it the server's"
                f" options (host, dbname, ...) and its user mapping's (user, password); {mappings} user"
                " mapping(s) on it",
                fix,
                f"foreign-server:{name}",
            )
        )
    return found
