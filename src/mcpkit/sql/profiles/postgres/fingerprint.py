"""PostgreSQL's catalog fingerprint: what a change by an administrator touches (`reverify`)."""

from __future__ import annotations

from typing import Final

__all__ = ["PG_FINGERPRINT", "pg_fingerprint"]

_PG_CATALOGS: Final = (
    "pg_class", "pg_attribute", "pg_namespace", "pg_proc", "pg_rewrite", "pg_policy",
    "pg_type", "pg_operator", "pg_cast", "pg_aggregate", "pg_language", "pg_extension",
    "pg_default_acl", "pg_foreign_server", "pg_foreign_data_wrapper",
    "pg_foreign_table", "pg_largeobject_metadata", "pg_event_trigger", "pg_inherits",
    "pg_constraint", "pg_attrdef", "pg_collation", "pg_conversion", "pg_transform", "pg_opclass",
    "pg_opfamily", "pg_amop", "pg_amproc", "pg_ts_config", "pg_ts_dict", "pg_index", "pg_statistic_ext",
    "pg_partitioned_table", "pg_range", "pg_depend",
)  # fmt: skip
# The catalogs shared by the whole cluster, only their rows that concern this login or its database:
# every other database's roles, memberships and settings change under it (another application's
# DDL, tests in parallel), and each change re-ran the verification and discarded a masked call's
# rows (`reverify.Guard.after`) until its retries ran out.
_MINE: Final = "(pg_has_role(current_user, {0}, 'MEMBER') OR pg_has_role(session_user, {0}, 'MEMBER'))"
_SHARED: Final = {
    "pg_auth_members": f"{_MINE.format('member')} OR {_MINE.format('roleid')}",
    "pg_db_role_setting": "setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database"
    f" WHERE datname = current_database())) AND (setrole = 0 OR {_MINE.format('setrole')})",
    "pg_parameter_acl": "EXISTS (SELECT FROM pg_catalog.aclexplode(paracl) a"
    f" WHERE a.grantee = 0 OR {_MINE.format('a.grantee')})",
}
# pg_user_mapping is readable by superusers only; a user mapping is used only through a foreign table
# the role can read, which pg_class, pg_foreign_table and their ACLs show.


def pg_fingerprint(server_version: int) -> str:
    """The fingerprint's statement for a server of `server_version_num` (pg_parameter_acl is
    PostgreSQL 15+: before it there are no parameter grants to follow)."""
    shared = {c: w for c, w in _SHARED.items() if server_version >= 150000 or c != "pg_parameter_acl"}
    return (
        "SELECT concat_ws('/', "
        + ", ".join(
            f"(SELECT count(*) || ':' || sum(xmin::text::bigint) FROM pg_catalog.{c})" for c in _PG_CATALOGS
        )
        + "".join(
            f", (SELECT count(*) || ':' || sum(xmin::text::bigint) FROM pg_catalog.{c} WHERE {w})"
            for c, w in shared.items()
        )
        + ", (SELECT string_agg(row(rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolbypassrls, "
        "rolreplication, rolcanlogin, rolconfig)::text, ',' ORDER BY oid) FROM pg_catalog.pg_roles "
        "WHERE pg_has_role(current_user, oid, 'MEMBER')), "
        "(SELECT row(datdba, datacl)::text FROM pg_catalog.pg_database WHERE datname = current_database()), "
        "current_user)"
    )


PG_FINGERPRINT: Final = pg_fingerprint(150000)
"""One row: per catalog a grant, a view, a function, a policy, an operator, a cast, a type, a role
membership, a parameter or large-object ACL, a partition, a constraint, a collation, an operator
class, an index, an extended statistics object, a partition key or an extension membership lives
in, its row count and sum of `xmin` (of the cluster-wide memberships, per-role settings and
parameter ACLs, only the rows of the login's and the current role's roles and of this database);
the attributes of every role the login is a member of (its own included); the current database's
owner and ACL."""
# Per catalog, the row count and the SUM of xmin, not the newest xmin: any changed row (a GRANT is an
# UPDATE) is a new version carrying its transaction's xid, which moves the sum even when that
# transaction's xid is lower than the newest one (red team 10c: a transaction open since before a
# later commit). A change leaving both count and sum equal would need the catalog's own writes to
# cancel out exactly (new xids summing to the removed versions' xids); an agent cannot write the
# catalog, and freezing (xmin read as 2) only moves the sum (a spurious, passing re-verification).
# The attributes of every role the login is a member of (ALTER ROLE grp BYPASSRLS where grp is
# granted to it, REPLICATION) and the database's ACL (GRANT CREATE ON DATABASE) are read whole.
