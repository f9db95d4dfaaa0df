"""PostgreSQL 16+: each role grant carries its own INHERIT and SET options (`GRANT g TO m WITH INHERIT
FALSE, SET TRUE`), and `rolinherit` is only the default of new grants. The start-up checks decide by
what a grant gives (`profiles.postgres.membership`): its role's rights inherited (USAGE), taken on
by SET ROLE (SET), or grantable to itself (ADMIN); a grant that gives none of these is no reach.

Runs on the server MCPKIT_TEST_PG names; the per-grant tests are skipped below PostgreSQL 16. The
version gates (13 refused at start-up, pg_parameter_acl read from 15) run on any version.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from mcpkit.sql.checks import inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.maskcheck import derive_masks, enforce_masks
from mcpkit.sql.masking import MaskPolicy, reflect_schema
from mcpkit.sql.profiles.postgres.roles import shared_login_problems
from tests.sql.sql_support import PgScratch, pg_admin, pg_scratch

pytestmark = pytest.mark.postgres

SECRET = "ann.secret@corp-x.example"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    """customers (id, name, email): the reader holds (id, name); group `<db>_g` reads it whole and
    is granted to nobody yet."""
    with pg_admin(pg_url) as c:
        version = int(c.execute("SELECT current_setting('server_version_num')").fetchone()[0])  # type: ignore[index]
    if version < 160000:
        pytest.skip(f"per-grant INHERIT/SET options are PostgreSQL 16+ (server_version_num {version})")
    with pg_scratch(pg_url, "pg16opt") as scratch:
        a = scratch.admin
        a.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, email text)")
        a.execute(f"INSERT INTO customers VALUES (1, 'Ann', '{SECRET}')")
        a.execute(f"GRANT SELECT (id, name) ON customers TO {scratch.reader}")
        a.execute(f"CREATE ROLE {scratch.db}_g NOLOGIN")
        a.execute(f"GRANT SELECT ON customers TO {scratch.db}_g")
        try:
            yield scratch
        finally:
            a.execute(f"DROP OWNED BY {scratch.db}_g")
            with pg_admin(pg_url) as c:
                c.execute(f"DROP ROLE IF EXISTS {scratch.db}_g")


def _as_reader(pg: PgScratch, sql: str) -> str:
    """What `sql` answers on the reader's own login ('denied' for a permission error)."""
    with psycopg.connect(make_url(pg.reader_url).set(drivername="postgresql").render_as_string(False)) as c:
        try:
            return str(c.execute(sql).fetchone()[0])  # type: ignore[index]
        except psycopg.errors.InsufficientPrivilege:
            return "denied"


def _codes(pg: PgScratch) -> set[str]:
    engine = SqlEngine(pg.reader_url)
    try:
        return {f.code for f in inspect_account(engine).findings}
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ("INHERIT FALSE, SET TRUE", True),  # SET ROLE pg_signal_backend takes it on
        ("INHERIT TRUE, SET FALSE", True),  # its rights are the reader's own
        ("INHERIT FALSE, SET FALSE, ADMIN TRUE", True),  # it can GRANT it to itself WITH SET TRUE
        ("INHERIT FALSE, SET FALSE", False),  # a member that can neither use nor switch to it
    ],
)
def test_a_predefined_role_counts_by_what_its_grant_gives(pg: PgScratch, options: str, refused: bool) -> None:
    pg.admin.execute(f"GRANT pg_signal_backend TO {pg.reader} WITH {options}")
    can_switch = _as_reader(pg, "SELECT set_config('role', 'pg_signal_backend', true)") != "denied"
    assert can_switch == ("SET TRUE" in options)
    assert ("pg_signal_backend" in _codes(pg)) == refused


@pytest.mark.parametrize("role", ["pg_create_subscription", "pg_use_reserved_connections"])
def test_the_predefined_roles_postgresql_16_added_are_refused(pg: PgScratch, role: str) -> None:
    """Before: the list stopped at PostgreSQL 15's roles (pg_maintain, 17, is listed too, untested)."""
    pg.admin.execute(f"GRANT {role} TO {pg.reader}")
    assert role in _codes(pg)


def _enforce(pg: PgScratch) -> None:
    engine = SqlEngine(pg.reader_url)
    try:
        policy = MaskPolicy.of(["customers.email"])
        tables = policy.masked_tables(reflect_schema(engine.sa_engine, policy=policy))
        _, masked = derive_masks(engine, policy, tables)
        enforce_masks(engine, masked)
    finally:
        engine.close()


def test_a_group_the_reader_can_switch_to_reads_the_masked_column(pg: PgScratch) -> None:
    group = f"{pg.db}_g"
    pg.admin.execute(f"GRANT {group} TO {pg.reader} WITH INHERIT FALSE, SET TRUE")
    assert _as_reader(pg, "SELECT email FROM customers") == "denied"
    assert _as_reader(pg, f"SELECT set_config('role', '{group}', true)") == group
    with pytest.raises(SqlConfigError, match=f"after SET ROLE {group}"):
        _enforce(pg)


def test_a_group_granted_with_set_false_is_not_one_set_role_away(pg: PgScratch) -> None:
    """Before: MEMBER counted it, and the masks were refused for a SET ROLE the server denies."""
    group = f"{pg.db}_g"
    pg.admin.execute(f"GRANT {group} TO {pg.reader} WITH INHERIT FALSE, SET FALSE")
    assert _as_reader(pg, f"SELECT set_config('role', '{group}', true)") == "denied"
    assert _as_reader(pg, "SELECT email FROM customers") == "denied"
    _enforce(pg)


def _shared_problems(pg: PgScratch, roles: list[str]) -> list[str]:
    engine = create_engine(make_url(pg.reader_url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            return shared_login_problems(conn, roles)
    finally:
        engine.dispose()


def test_shared_login_inheritance_is_read_per_grant(pg: PgScratch) -> None:
    """Before: `rolinherit` alone decided. A NOINHERIT account granted a role WITH INHERIT TRUE
    inherits its rights (a call without SET ROLE read the masked column) and passed; an INHERIT
    account whose grants are all WITH INHERIT FALSE was refused."""
    group = f"{pg.db}_g"
    pg.admin.execute(f"ALTER ROLE {pg.reader} NOINHERIT")
    pg.admin.execute(f"GRANT {group} TO {pg.reader} WITH INHERIT TRUE")
    assert _as_reader(pg, "SELECT email FROM customers") == SECRET
    problems = _shared_problems(pg, [group])
    assert any("inherits the rights of" in p and f"REVOKE INHERIT OPTION FOR {group}" in p for p in problems)
    pg.admin.execute(f"REVOKE INHERIT OPTION FOR {group} FROM {pg.reader}")  # the printed fix
    pg.admin.execute(f"ALTER ROLE {pg.reader} INHERIT")  # the default of new grants only
    assert _as_reader(pg, "SELECT email FROM customers") == "denied"
    assert _shared_problems(pg, [group]) == []


def test_shared_login_must_be_able_to_set_role(pg: PgScratch) -> None:
    """Before: MEMBER passed a grant WITH SET FALSE; every call's SET ROLE then failed."""
    group = f"{pg.db}_g"
    pg.admin.execute(f"GRANT {group} TO {pg.reader} WITH INHERIT FALSE, SET FALSE")
    assert any("cannot SET ROLE" in p for p in _shared_problems(pg, [group]))
    pg.admin.execute(f"GRANT {group} TO {pg.reader} WITH SET TRUE")
    assert _shared_problems(pg, [group]) == []


@pytest.fixture
def reader(pg_url: str) -> Iterator[PgScratch]:
    """A scratch database and login on any supported version."""
    with pg_scratch(pg_url, "pgver") as scratch:
        yield scratch


def test_a_server_older_than_14_is_refused_at_start_up(reader: PgScratch) -> None:
    """The audit reads pg_proc.prosqlbody (PostgreSQL 14+): an older server is told so, not failed
    with a catalog error. The version is faked: no such server runs here."""
    engine = SqlEngine(reader.reader_url)
    try:
        with engine.sa_engine.connect():
            pass  # the dialect reads the server's version on the first connection
        engine.sa_engine.dialect.server_version_info = (13, 14)
        with pytest.raises(SqlConfigError, match=r"PostgreSQL 14 or later is required; the server is 13\.14"):
            inspect_account(engine)
    finally:
        engine.close()


def test_the_fingerprint_reads_pg_parameter_acl_only_where_it_exists(reader: PgScratch) -> None:
    """pg_parameter_acl is PostgreSQL 15+: on 14 the re-verification must not read it."""
    from mcpkit.sql.profiles.postgres.fingerprint import PG_FINGERPRINT, pg_fingerprint

    old, new = pg_fingerprint(140000), pg_fingerprint(160000)
    assert "pg_parameter_acl" not in old and "pg_parameter_acl" in new and new == PG_FINGERPRINT
    with psycopg.connect(
        make_url(reader.reader_url).set(drivername="postgresql").render_as_string(False)
    ) as c:
        assert c.execute(old).fetchone() is not None
