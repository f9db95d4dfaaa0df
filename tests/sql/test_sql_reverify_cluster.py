"""A masked server keeps answering while other databases of the cluster change.

Seen in parallel test runs: masked calls answered SOURCE_UNVERIFIED though they passed alone. The
PostgreSQL fingerprint read the shared catalogs' memberships and per-role settings whole, so every
role another database's application (another test worker) created, granted or configured moved it:
each masked call re-ran the verification and, its fingerprint read again after the statement having
moved too, discarded its rows (`Guard.after`) until its retries ran out. Now only the memberships
and settings of the login's own roles and of its database count; a change there still moves it.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.profiles.postgres import PostgresProfile
from mcpkit.sql.profiles.postgres.fingerprint import PG_FINGERPRINT
from mcpkit.sql.reverify import Guard
from tests.sql.sql_support import PgScratch, masks_file, pg_admin, pg_scratch, run_cli

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rvclu") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, email text);
            INSERT INTO customers VALUES (1, 'ann@secret.example');
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id) ON customers TO {db.reader};
            """
        )
        yield db


@pytest.fixture
def elsewhere(pg_url: str) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """A superuser connection to another database, and a prefix for the roles it creates."""
    tag = f"mk_rvclu_{secrets.token_hex(3)}"
    with pg_admin(pg_url) as admin:
        try:
            yield admin, tag
        finally:
            for row in admin.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (f"{tag}%",)):
                admin.execute(f"REVOKE SET ON PARAMETER lo_compat_privileges FROM {row[0]}")
                admin.execute(f"DROP ROLE {row[0]}")


def _unrelated(admin: psycopg.Connection[Any], tag: str, n: int) -> None:
    """What another application does on the same cluster: roles, memberships, their settings and
    parameter grants."""
    a, b = f"{tag}_a{n}", f"{tag}_b{n}"
    admin.execute(f"CREATE ROLE {a}; CREATE ROLE {b} LOGIN; GRANT {a} TO {b}")
    admin.execute(f"ALTER ROLE {b} SET work_mem = '8MB'")
    admin.execute(f"GRANT SET ON PARAMETER lo_compat_privileges TO {b}")
    admin.execute(f"ALTER ROLE {b} IN DATABASE test SET statement_timeout = '5s'")
    admin.execute("ALTER ROLE ALL IN DATABASE test SET lock_timeout = '9s'")
    admin.execute("ALTER ROLE ALL IN DATABASE test RESET lock_timeout")
    if n:
        admin.execute(f"REVOKE SET ON PARAMETER lo_compat_privileges FROM {tag}_b{n - 1}")
        admin.execute(f"DROP ROLE {tag}_b{n - 1}, {tag}_a{n - 1}")


def test_postgres_fingerprint_ignores_other_databases_roles_and_settings(
    pg: PgScratch, elsewhere: tuple[psycopg.Connection[Any], str]
) -> None:
    admin, tag = elsewhere
    reader = make_url(pg.reader_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(reader, autocommit=True) as ro:
        before = ro.execute(PG_FINGERPRINT).fetchone()
        for n in range(2):
            _unrelated(admin, tag, n)
            assert ro.execute(PG_FINGERPRINT).fetchone() == before, n  # before: moved every time
        group = f"{tag}_g"
        for change in (
            f"CREATE ROLE {group}; GRANT {group} TO {pg.reader}",  # a membership of the login
            f"GRANT {tag}_a1 TO {group}",  # one of a role the login is a member of
            f"ALTER ROLE {group} SET work_mem = '4MB'",
            f"ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = public",
            f"ALTER ROLE ALL IN DATABASE {pg.db} SET lock_timeout = '9s'",
            f"GRANT SET ON PARAMETER lo_compat_privileges TO {group}",
            f"REVOKE SET ON PARAMETER lo_compat_privileges FROM {group}",
            f"REVOKE {group} FROM {pg.reader}",
        ):
            before = ro.execute(PG_FINGERPRINT).fetchone()
            admin.execute(change)
            assert ro.execute(PG_FINGERPRINT).fetchone() != before, change
        admin.execute(f"ALTER ROLE ALL IN DATABASE {pg.db} RESET lock_timeout")


def test_postgres_a_masked_call_answers_while_other_databases_change(
    pg: PgScratch,
    elsewhere: tuple[psycopg.Connection[Any], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before every fingerprint read (start-up's, the call's before and after its statement, those
    # after each retry) another database's roles change: deterministic, no timing.
    admin, tag = elsewhere
    read, counter = PostgresProfile.catalog_fingerprint, itertools.count()

    def busy_cluster(self: PostgresProfile, dbapi: Any) -> str:
        _unrelated(admin, tag, next(counter))
        return read(self, dbapi)

    monkeypatch.setattr(PostgresProfile, "catalog_fingerprint", busy_cluster)
    masks = masks_file(tmp_path, "customers.email")
    sql = "SELECT id, email FROM customers"
    code, out = run_cli(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, sql)
    assert code == 0 and "<masked>" in out and "secret" not in out, out  # before: SOURCE_UNVERIFIED
    assert next(counter) >= 3, "the call read the fingerprint before and after its statement"

    # A change of this database's grants while it runs is still refused.
    monkeypatch.setattr(PostgresProfile, "catalog_fingerprint", read)
    check = Guard.check

    def granted(self: Guard, *args: Any) -> None:
        pg.admin.execute(f"GRANT SELECT ON customers TO {pg.reader}")
        check(self, *args)

    monkeypatch.setattr(Guard, "check", granted)
    code, out = run_cli(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, sql)
    assert code != 0 and "ann@" not in out, out
