"""Red team mask17 F6 (PostgreSQL): a reader that is a NOINHERIT member of a group role that reads
the masked column passed the masks check (`has_column_privilege` counts inherited privileges only),
yet one `SET ROLE` read the column. Every role the login can SET ROLE to counts now."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.maskcheck import derive_masks, enforce_masks
from mcpkit.sql.masking import MaskPolicy, reflect_schema
from tests.sql.sql_support import PgScratch, pg_admin, pg_scratch

SECRET = "ann.secret@corp-x.example"

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    """customers (id, name, email): the reader holds (id, name); group `<db>_full` reads it whole."""
    with pg_scratch(pg_url, "maskfix") as scratch:
        group = f"{scratch.db}_full"
        a = scratch.admin
        a.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, email text)")
        a.execute(f"INSERT INTO customers VALUES (1, 'Ann', '{SECRET}')")
        a.execute(f"GRANT SELECT (id, name) ON customers TO {scratch.reader}")
        a.execute(f"CREATE ROLE {group} NOLOGIN")
        a.execute(f"GRANT SELECT ON customers TO {group}")
        # NOINHERIT first: from PostgreSQL 16 it is only the default of the grants made after it
        a.execute(f"ALTER ROLE {scratch.reader} NOINHERIT")
        a.execute(f"GRANT {group} TO {scratch.reader}")
        try:
            yield scratch
        finally:
            a.execute(f"DROP OWNED BY {group}")
            with pg_admin(pg_url) as c:
                c.execute(f"DROP ROLE IF EXISTS {group}")


def _enforce(url: str) -> None:
    engine = SqlEngine(url)
    try:
        policy = MaskPolicy.of(["customers.email"])
        _, masked = derive_masks(
            engine, policy, policy.masked_tables(reflect_schema(engine.sa_engine, policy=policy))
        )
        enforce_masks(engine, masked)
    finally:
        engine.close()


def _read_after_set_role(scratch: PgScratch, group: str) -> list[str]:
    url = scratch.reader_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(url, autocommit=True) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT email FROM customers")
        try:
            c.execute(f"SET ROLE {group}")
        except psycopg.errors.InsufficientPrivilege:
            return []
        return [str(r[0]) for r in c.execute("SELECT email FROM customers")]


def test_a_group_role_one_set_role_away_that_reads_a_masked_column_is_refused(pg: PgScratch) -> None:
    group = f"{pg.db}_full"
    assert _read_after_set_role(pg, group) == [SECRET]  # what the database alone would hand out
    with pytest.raises(SqlConfigError) as raised:
        _enforce(pg.reader_url)
    message = str(raised.value)
    assert f"can read masked column(s) email of public.customers after SET ROLE {group}" in message
    assert f"REVOKE {group} FROM {pg.reader}" in message
    pg.admin.execute(f"REVOKE {group} FROM {pg.reader}")  # the printed fix
    _enforce(pg.reader_url)
    assert _read_after_set_role(pg, group) == []


def test_a_view_readable_one_set_role_away_is_refused(pg: PgScratch) -> None:
    """A definer view over the masked column, granted only to the group: also one SET ROLE away."""
    group = f"{pg.db}_full"
    pg.admin.execute(f"REVOKE SELECT ON customers FROM {group}")
    pg.admin.execute("CREATE VIEW emails AS SELECT id, email FROM customers")
    pg.admin.execute(f"GRANT SELECT ON emails TO {group}")
    with pytest.raises(SqlConfigError, match=r"view public\.emails reads a masked column"):
        _enforce(pg.reader_url)
