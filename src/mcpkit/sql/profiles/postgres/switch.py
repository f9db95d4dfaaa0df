"""PostgreSQL roles one `SET ROLE` away: the roles the current role is a member of without inheriting
their rights (NOINHERIT, directly or on the way). `has_column_privilege` on the login counts only
what it inherits, yet `SET ROLE` (or `set_config('role', ...)`) takes such a role's rights on; only
admission's refusal of those stands between (red team mask17 F6). So the checks count them too."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.catalog_path import on_path
from mcpkit.sql.profiles.postgres.membership import can_set

__all__ = ["switched_findings", "switched_masked_columns", "switched_reads"]

# {can_set}: every role SET ROLE reaches (`membership.can_set`: MEMBER up to PostgreSQL 15, SET from
# 16, where a grant WITH SET FALSE is a member that cannot switch); USAGE: those whose rights are
# inherited, already counted by the privilege functions on the current role.
_REACHED: Final = "r.rolname <> current_user AND {can_set} AND NOT pg_has_role(current_user, r.oid, 'USAGE')"


def _reached(conn: Connection, sql: str) -> str:
    return sql.replace("{can_set}", can_set(conn, "current_user", "r.oid"))


# The current role's direct membership that leads to r (what to revoke).
_VIA: Final = """coalesce((SELECT quote_ident(g.rolname) FROM pg_catalog.pg_auth_members m
    JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
    WHERE m.member = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
      AND pg_has_role(g.oid, r.oid, 'MEMBER') ORDER BY g.oid = r.oid DESC LIMIT 1), quote_ident(r.rolname))"""
_MASKED: Final = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(r.rolname), {_VIA},
       quote_ident(current_user), array_agg(a.attname ORDER BY a.attnum)
FROM pg_catalog.pg_roles r
CROSS JOIN pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = coalesce(to_regclass(quote_ident(:table)), to_regclass(:table)) AND a.attname = ANY(:masked)
  AND {_REACHED} AND has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT')
GROUP BY n.nspname, c.relname, r.rolname, r.oid
ORDER BY 2
"""


def switched_masked_columns(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """One finding per table and role one SET ROLE away that reads a masked column of it, with the
    REVOKE of the membership that leads there."""
    findings = []
    for table, columns in sorted(masked.items()):
        rows = conn.execute(
            text(_reached(conn, _MASKED)), {"table": on_path(conn, table), "masked": sorted(columns)}
        ).all()
        for name, role, via, user, readable in rows:
            findings.append(
                Finding(
                    "masked-column-readable",
                    f"can read masked column(s) {', '.join(readable)} of {name} after SET ROLE {role}"
                    " (a member of it: SET ROLE takes its rights on, INHERIT or not)",
                    f"REVOKE {via} FROM {user}; or REVOKE SELECT ON {name} FROM {role} and grant it the"
                    " other columns only",
                )
            )
    return findings


# A relation some role one SET ROLE away reads (a column of it, or all) that the current role cannot.
_READS: Final = f"""
SELECT r.rolname, {_VIA}, n.nspname || '.' || c.relname
FROM pg_catalog.pg_roles r
CROSS JOIN pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE {_REACHED}
  AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%' AND has_schema_privilege(r.oid, n.oid, 'USAGE')
  AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                AND has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT')
                AND NOT (has_schema_privilege(n.oid, 'USAGE')
                         AND has_column_privilege(c.oid, a.attnum, 'SELECT')))
ORDER BY 1, 3 LIMIT 1
"""


def switched_reads(conn: Connection) -> tuple[str, str, str] | None:
    """A role one SET ROLE away that reads a relation the current role cannot: (role, the
    membership to revoke, the relation), or None."""
    row = conn.execute(text(_reached(conn, _READS))).first()
    return None if row is None else (str(row[0]), str(row[1]), str(row[2]))


# The roles to inspect as: one SET ROLE away, not a superuser (refused by name already), not
# skipped (a predefined role, refused by name through any membership; a `--role-map` role, checked
# as its own identity), and holding something the current role does not: a role whose rights come
# from it has a grant, an object or a policy in this database or a shared catalog (`pg_shdepend`,
# readable by every role). Each inspection costs a whole route audit.
_SWITCHES: Final = f"""
SELECT quote_ident(r.rolname), {_VIA}, quote_ident(current_user)
FROM pg_catalog.pg_roles r
WHERE {_REACHED} AND NOT r.rolsuper AND NOT r.rolname = ANY(:skip)
  AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles s JOIN pg_catalog.pg_shdepend d ON d.refobjid = s.oid
              WHERE pg_has_role(r.oid, s.oid, 'USAGE') AND NOT pg_has_role(current_user, s.oid, 'USAGE')
                AND d.refclassid = 'pg_catalog.pg_authid'::regclass
                AND d.dbid IN (0, (SELECT oid FROM pg_catalog.pg_database
                                   WHERE datname = current_database())))
ORDER BY r.rolname
"""


def _same(f: Finding, g: Finding) -> bool:
    """The same grant found twice (to PUBLIC, or to a role both reach)."""
    specific = f.opt_in is not None and ":" in f.opt_in
    return f.code == g.code and (f.fix == g.fix or (specific and f.opt_in == g.opt_in))


def switched_findings(
    conn: Connection,
    inspect: Callable[[Connection], list[Finding]],
    found: Sequence[Finding],
    skip: Sequence[str],
) -> list[Finding]:
    """`inspect` run as each role one SET ROLE away but `skip` (inside a savepoint, undone after):
    what it finds that `found` (the current role's) does not, each with the REVOKE of the membership.

    An agent query that reached `set_config('role', ...)` or a function running SQL from a string
    would hold these rights; `has_*_privilege` on the current role does not count them.
    """
    extra: list[Finding] = []
    rows = conn.execute(text(_reached(conn, _SWITCHES)), {"skip": list(skip)}).all()
    for role, via, user in rows:
        conn.exec_driver_sql("SAVEPOINT mcpkit_switch")
        try:
            try:
                conn.exec_driver_sql(f"SET LOCAL ROLE {role}")
            except DBAPIError:  # PostgreSQL 16+: a membership WITH SET FALSE cannot switch
                continue
            theirs = inspect(conn)
        finally:
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT mcpkit_switch")
            conn.exec_driver_sql("RELEASE SAVEPOINT mcpkit_switch")
        for f in theirs:
            if any(_same(f, g) for g in [*found, *extra]):
                continue
            extra.append(
                Finding(
                    f.code,
                    f"after SET ROLE {role} ({user} is a member of it: SET ROLE takes its rights on,"
                    f" INHERIT or not): {f.message}",
                    f"REVOKE {via} FROM {user}; or {f.fix}",
                    f.opt_in,
                )
            )
    return extra
