"""PostgreSQL: every least-privilege check counts the rights of a role the login can `SET ROLE` to.

A NOINHERIT membership (or one through a NOINHERIT role) keeps a group's rights out of
`has_*_privilege` on the login, yet `SET ROLE` (or `set_config('role', ...)`, or a function that runs
SQL from a string) takes them on. The masks and role-map checks counted them; CREATE on a schema or
the database, readable foreign tables, routes to hazardous functions and views read with their
owner's rights did not (start-up said ok). Each is now refused with `REVOKE <group> FROM <login>`,
and gone after it. Superuser, the predefined roles and ownership were counted already (membership).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Connection, make_url

from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import AccountReport
from mcpkit.sql.profiles.base import Finding
from tests.sql.sql_support import pg_admin, pg_need_extensions

CASES = {
    "create-schema": ["CREATE SCHEMA {g}_s", "GRANT USAGE, CREATE ON SCHEMA {g}_s TO {g}"],
    "create-database": ["GRANT CREATE ON DATABASE {db} TO {g}"],
    "function": [
        "CREATE SCHEMA {g}_f",
        "GRANT USAGE ON SCHEMA {g}_f TO {g}",
        "CREATE FUNCTION {g}_f.boom() RETURNS int LANGUAGE plpgsql VOLATILE AS 'BEGIN RETURN 1; END'",
        "REVOKE EXECUTE ON FUNCTION {g}_f.boom() FROM PUBLIC",
        "GRANT EXECUTE ON FUNCTION {g}_f.boom() TO {g}",
    ],
    "foreign-table": [
        "CREATE EXTENSION file_fdw",
        "CREATE SERVER {g}_srv FOREIGN DATA WRAPPER file_fdw",
        "CREATE FOREIGN TABLE public.hostname (a text) SERVER {g}_srv OPTIONS (filename '/etc/hostname')",
        "GRANT SELECT ON public.hostname TO {g}",
    ],
    "owner-view": [
        "CREATE TABLE public.base (a int)",
        "CREATE VIEW public.v AS SELECT random() AS r, a FROM public.base",
        "GRANT SELECT ON public.v TO {g}",
    ],
    "table-owner": ["CREATE TABLE public.owned (a int)", "ALTER TABLE public.owned OWNER TO {g}"],
    "pg_read_server_files": ["GRANT pg_read_server_files TO {g}"],
    "pg_execute_server_program": ["GRANT pg_execute_server_program TO {g}"],
    "pg_signal_backend": ["GRANT pg_signal_backend TO {g}"],
    "pg_read_all_stats": ["GRANT pg_read_all_stats TO {g}"],
    "powerful-membership": ["ALTER ROLE {g} SUPERUSER"],
}
# Counted before this fix (through the membership itself): a regression guard, not a new refusal.
COUNTED_BEFORE = {"pg_read_server_files", "pg_execute_server_program", "pg_signal_backend"}
COUNTED_BEFORE |= {"pg_read_all_stats", "powerful-membership"}


@pytest.fixture
def scratch(pg_url: str) -> Iterator[tuple[str, str, str, str]]:
    """A database of its own, a NOINHERIT login and the group it is a member of: (admin URL,
    login URL, login, group)."""
    tag = secrets.token_hex(4)
    db, login, group = f"maskleft_sw_{tag}", f"maskleft_sw_{tag}_login", f"maskleft_sw_{tag}_g"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE ROLE {group} NOLOGIN")
        c.execute(f"CREATE ROLE {login} LOGIN NOINHERIT")
        c.execute(f"GRANT {group} TO {login}")
    admin = make_url(pg_url).set(database=db)
    try:
        with pg_admin(admin.render_as_string(hide_password=False)) as c:
            c.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            c.execute(f"REVOKE ALL ON DATABASE {db} FROM PUBLIC")
            c.execute(f"GRANT CONNECT ON DATABASE {db} TO {login}")
        yield (
            admin.render_as_string(hide_password=False),
            admin.set(username=login, password=None).render_as_string(hide_password=False),
            login,
            group,
        )
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {login}")
            c.execute(f"DROP ROLE IF EXISTS {group}")


def _report(url: str) -> AccountReport:
    engine = SqlEngine(url)
    try:
        return inspect_account(engine)
    finally:
        engine.close()


@pytest.mark.postgres
@pytest.mark.parametrize("code", sorted(CASES))
def test_postgres_a_right_one_set_role_away_is_refused_then_clean(
    scratch: tuple[str, str, str, str], code: str
) -> None:
    admin, url, login, group = scratch
    assert not _report(url).findings  # before: a clean reader
    db = make_url(admin).database
    with pg_admin(admin) as c:
        if code == "foreign-table":
            pg_need_extensions(c, "file_fdw")
        for statement in CASES[code]:
            c.execute(statement.format(g=group, db=db))
    report = _report(url)
    found = [f for f in report.findings if f.code == code]
    assert found, [f.line() for f in report.findings]
    assert all(f.fix.startswith(f"REVOKE {group} FROM {login}") for f in found), [f.line() for f in found]
    with pytest.raises(SqlConfigError, match=f"REVOKE {group} FROM {login}"):
        ensure_safe_account(report)
    with pg_admin(admin) as c:
        c.execute(f"REVOKE {group} FROM {login}")  # the printed fix
    assert not [f for f in _report(url).findings if f.code == code]


@pytest.mark.postgres
def test_postgres_a_group_holding_only_reads_adds_nothing(scratch: tuple[str, str, str, str]) -> None:
    admin, url, _, group = scratch
    with pg_admin(admin) as c:
        c.execute("CREATE TABLE public.t (a int)")
        c.execute(f"GRANT SELECT ON public.t TO {group}")
        c.execute("CREATE SCHEMA open")
        c.execute("GRANT CREATE, USAGE ON SCHEMA open TO PUBLIC")  # the login's own finding, once
    found = [f.line() for f in _report(url).findings]
    assert len(found) == 1 and "REVOKE CREATE ON SCHEMA open FROM PUBLIC" in found[0], found


@pytest.mark.postgres
def test_postgres_a_group_holding_nothing_of_its_own_is_not_audited(
    scratch: tuple[str, str, str, str],
) -> None:
    # Each role inspected costs a whole route audit: only one that holds something is.
    from mcpkit.sql.profiles.postgres.switch import switched_findings

    admin, url, _, group = scratch
    calls: list[str] = []

    def audit(conn: Connection) -> list[Finding]:
        calls.append(str(conn.exec_driver_sql("SELECT current_user").scalar()))
        return []

    def inspected(skip: tuple[str, ...] = ()) -> list[str]:
        engine = SqlEngine(url)
        try:
            with engine.session(30.0, "test") as (conn, _):
                switched_findings(conn, audit, [], skip)
        finally:
            engine.close()
        return calls

    assert inspected() == []
    with pg_admin(admin) as c:
        c.execute("CREATE TABLE public.t (a int)")
        c.execute(f"GRANT SELECT ON public.t TO {group}")
    assert inspected((group,)) == []  # a --role-map role: checked as its own identity instead
    assert inspected() == [group]
