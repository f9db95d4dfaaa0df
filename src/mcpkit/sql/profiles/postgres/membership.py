"""PostgreSQL role membership by what a grant gives, per server version.

Up to PostgreSQL 15 a member of a role can always SET ROLE to it, and inherits its rights when the
member is INHERIT (`rolinherit`): `pg_has_role(..., 'MEMBER')` is what SET ROLE reaches, 'USAGE' what
is inherited. PostgreSQL 16 gives each grant its own options (`pg_auth_members.inherit_option`,
`set_option`, `admin_option`; `GRANT r TO m WITH INHERIT FALSE, SET FALSE`) and `rolinherit` is only
the default of new grants: 'MEMBER' then counts every chain of grants, even one that gives nothing,
'USAGE' the inherited rights, 'SET' what SET ROLE reaches (verified on PostgreSQL 16.2).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

__all__ = ["can_set", "per_grant", "reaches"]


def per_grant(conn: Connection) -> bool:
    """The server keeps INHERIT and SET per grant (PostgreSQL 16+)."""
    info = conn.dialect.server_version_info
    return info is not None and int(info[0]) >= 16


def can_set(conn: Connection, who: str, role: str) -> str:
    """SQL: `who` can SET ROLE to `role` (NOINHERIT or indirect memberships included)."""
    return f"pg_has_role({who}, {role}, '{'SET' if per_grant(conn) else 'MEMBER'}')"


def reaches(conn: Connection, who: str, role: str) -> str:
    """SQL: `who` holds `role`'s rights or can take them on: inherits them, can SET ROLE to it, or
    (PostgreSQL 16+) holds ADMIN OPTION on it (it could grant the role to itself)."""
    if not per_grant(conn):
        return f"pg_has_role({who}, {role}, 'MEMBER')"
    return (
        f"(pg_has_role({who}, {role}, 'USAGE') OR pg_has_role({who}, {role}, 'SET')"
        f" OR pg_has_role({who}, {role}, 'MEMBER WITH ADMIN OPTION'))"
    )
