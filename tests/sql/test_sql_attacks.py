"""The attack corpus against the real databases: refused or failed, and nothing changed.

Each case runs through the same path as `execute_query` (admission, engine, shaping) as a
least-privilege account. A snapshot of the data, the catalog, the roles' settings and the files a
successful attack would touch is taken before and after each case.

The defense-in-depth tests switch admission off (test-only: the service's private `_admit` is
replaced) and run every write attempt as an account that *may* write the tables: the database's
read-only session alone must keep everything unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import Admitted
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import (
    Case,
    DbEnv,
    changed,
    load_corpus,
    mysql_snapshot,
    pg_snapshot,
    sqlite_snapshot,
)

# Fingerprints the whole server (roles, databases, settings): runs after the parallel part.
pytestmark = pytest.mark.serial

PG_CASES = load_corpus("postgres.sql")
SQLITE_CASES = load_corpus("sqlite.sql")
MYSQL_CASES = load_corpus("mysql.sql")
TIMEOUT_S = 3.0


def test_corpus_sizes() -> None:
    assert len(PG_CASES) >= 60
    assert len(SQLITE_CASES) >= 40
    assert len(MYSQL_CASES) >= 30


def _sql(case: Case, env: DbEnv) -> str:
    return case.sql.replace("{canary}", str(env.canary)).replace("{schema}", env.schema)


def _outcome(service: SqlService, sql: str) -> str:
    try:
        service.query(sql, call_id="attack", max_rows=5)
    except Refused:
        return "refused"
    except (QueryFailed, QueryTimeout):
        return "failed"
    return "answered"


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    return Admitted(sql=sql, tree=exp.Select())


def _check(
    service: SqlService, case: Case, env: DbEnv, snapshot: Callable[[], dict[str, Any]], *, admission: bool
) -> None:
    before = snapshot()
    outcome = _outcome(service, _sql(case, env))
    diff = changed(before, snapshot())
    assert not diff, f"{case.name}: the attack changed {diff} (outcome {outcome})"
    if admission:
        assert outcome == "refused", f"{case.name}: expected admission to refuse it, got {outcome}"


# --- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_canary(pg_env: DbEnv) -> Iterator[psycopg.Connection[Any]]:
    """A session of the read-only role that an attack could try to terminate."""
    url = make_url(pg_env.ro_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


@pytest.mark.postgres
@pytest.mark.parametrize("case", PG_CASES, ids=lambda c: c.id)
def test_postgres_attack(case: Case, pg_env: DbEnv, pg_canary: psycopg.Connection[Any]) -> None:
    engine = SqlEngine(pg_env.ro_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        _check(
            service,
            case,
            pg_env,
            lambda: pg_snapshot(pg_env.admin_url, pg_env.schema, pg_env.canary),
            admission=True,
        )
        assert pg_canary.execute("SELECT 1").fetchone() == (1,), "the canary session was terminated"
    finally:
        engine.close()


@pytest.mark.postgres
@pytest.mark.parametrize("case", [c for c in PG_CASES if c.meta.get("write") == "yes"], ids=lambda c: c.id)
def test_postgres_read_only_session_holds_without_admission(case: Case, pg_env: DbEnv) -> None:
    engine = SqlEngine(pg_env.rw_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        service._admit = _passthrough
        _check(
            service,
            case,
            pg_env,
            lambda: pg_snapshot(pg_env.admin_url, pg_env.schema, pg_env.canary),
            admission=False,
        )
    finally:
        engine.close()


def _assigns_xid(engine: SqlEngine, sql: str) -> bool:
    """Run `sql` in the server's read-only session; whether the transaction got a transaction id.

    Sound on a shared server where others burn ids all the time: it asks this transaction only
    (`pg_current_xact_id_if_assigned`), inside it, after the statement (a savepoint keeps the
    transaction usable when the statement fails; a savepoint alone assigns no id).
    """
    with engine.session(TIMEOUT_S, "xid") as (conn, _):
        conn.exec_driver_sql("SAVEPOINT mk_attack")
        try:
            conn.exec_driver_sql(sql)
        except DBAPIError:
            try:
                conn.exec_driver_sql("ROLLBACK TO SAVEPOINT mk_attack")
            except DBAPIError:
                return True  # the statement left the transaction (COMMIT; ...): count it as a change
        return conn.exec_driver_sql("SELECT pg_current_xact_id_if_assigned()").scalar() is not None


@pytest.mark.postgres
def test_postgres_xid_probe_can_fail(pg_env: DbEnv) -> None:
    engine = SqlEngine(pg_env.ro_url)
    try:
        assert _assigns_xid(engine, "SELECT txid_current()")
        assert not _assigns_xid(engine, "SELECT count(*) FROM sales_demo")
    finally:
        engine.close()


@pytest.mark.postgres
@pytest.mark.parametrize("case", PG_CASES, ids=lambda c: c.id)
def test_postgres_attack_assigns_no_transaction_id(case: Case, pg_env: DbEnv) -> None:
    # What admission lets through assigns no transaction id; what would assign one with admission
    # off (txid_current and friends are executable by PUBLIC in pg_catalog) is refused by it.
    engine = SqlEngine(pg_env.ro_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        sql = _sql(case, pg_env)
        try:
            admitted: str | None = service.admit(sql, 5).sql
        except Refused:
            admitted = None
        if admitted is not None:
            assert not _assigns_xid(engine, admitted), case.name
        elif _assigns_xid(engine, sql):
            assert _outcome(service, sql) == "refused", case.name
    finally:
        engine.close()


# --- SQLite -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SQLITE_CASES, ids=lambda c: c.id)
def test_sqlite_attack(case: Case, sqlite_copy: DbEnv) -> None:
    engine = SqlEngine(sqlite_copy.ro_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        _check(service, case, sqlite_copy, lambda: sqlite_snapshot(sqlite_copy.canary), admission=True)
    finally:
        engine.close()


@pytest.mark.parametrize(
    "case", [c for c in SQLITE_CASES if c.meta.get("write") == "yes"], ids=lambda c: c.id
)
def test_sqlite_read_only_file_holds_without_admission(case: Case, sqlite_copy: DbEnv) -> None:
    engine = SqlEngine(sqlite_copy.rw_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        service._admit = _passthrough
        _check(service, case, sqlite_copy, lambda: sqlite_snapshot(sqlite_copy.canary), admission=False)
    finally:
        engine.close()


# --- MySQL / MariaDB --------------------------------------------------------------------------


@pytest.mark.mysql
@pytest.mark.parametrize("case", MYSQL_CASES, ids=lambda c: c.id)
def test_mysql_attack(case: Case, mysql_env: DbEnv) -> None:
    engine = SqlEngine(mysql_env.ro_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        _check(
            service,
            case,
            mysql_env,
            lambda: mysql_snapshot(mysql_env.admin_url, mysql_env.schema, mysql_env.canary),
            admission=True,
        )
    finally:
        engine.close()


@pytest.mark.mysql
@pytest.mark.parametrize("case", [c for c in MYSQL_CASES if c.meta.get("write") == "yes"], ids=lambda c: c.id)
def test_mysql_read_only_session_holds_without_admission(case: Case, mysql_env: DbEnv) -> None:
    engine = SqlEngine(mysql_env.rw_url)
    try:
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        service._admit = _passthrough
        _check(
            service,
            case,
            mysql_env,
            lambda: mysql_snapshot(mysql_env.admin_url, mysql_env.schema, mysql_env.canary),
            admission=False,
        )
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_rw_role_really_can_write(pg_env: DbEnv) -> None:
    """The defense-in-depth tests mean something only if the role could write outside the session."""
    url = make_url(pg_env.rw_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE sales_demo SET units = units WHERE id = 1")
        conn.rollback()


@pytest.mark.mysql
def test_mysql_rw_user_really_can_write(mysql_env: DbEnv) -> None:
    """As above, for the MySQL write-capable user."""
    import pymysql

    u = make_url(mysql_env.rw_url)
    conn = pymysql.connect(
        host=u.host, port=u.port or 3306, user=u.username, password="", database=u.database
    )
    try:
        with conn.cursor() as c:
            c.execute("UPDATE sales_demo SET units = units WHERE id = 1")
        conn.rollback()
    finally:
        conn.close()


# --- the snapshots can fail -------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_snapshot_sees_a_write_and_a_file(pg_env: DbEnv) -> None:
    snap = lambda: pg_snapshot(pg_env.admin_url, pg_env.schema, pg_env.canary)  # noqa: E731
    before = snap()
    url = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {pg_env.schema}.audit_log (note) VALUES ('probe')")
        assert any(k.startswith("data:audit_log") for k in changed(before, snap()))
        conn.execute(f"DELETE FROM {pg_env.schema}.audit_log WHERE note = 'probe'")
        conn.execute(f"ALTER ROLE {pg_env.ro_user} SET work_mem = '8MB'")
        assert "role_settings" in changed(before, snap())
        conn.execute(f"ALTER ROLE {pg_env.ro_user} RESET work_mem")
    (pg_env.canary / "probe").write_text("x")
    try:
        assert changed(before, snap()) == ["files"]
    finally:
        (pg_env.canary / "probe").unlink()
    assert changed(before, snap()) == []


@pytest.mark.mysql
def test_mysql_snapshot_sees_a_write(mysql_env: DbEnv) -> None:
    import pymysql

    snap = lambda: mysql_snapshot(mysql_env.admin_url, mysql_env.schema, mysql_env.canary)  # noqa: E731
    before = snap()
    u = make_url(mysql_env.admin_url)
    conn = pymysql.connect(
        host=u.host, port=u.port or 3306, user=u.username, password="", database=u.database
    )
    try:
        with conn.cursor() as c:
            c.execute("UPDATE sales_demo SET units = units + 1 WHERE id = 1")
            conn.commit()
            assert "checksums" in changed(before, snap())
            c.execute("UPDATE sales_demo SET units = units - 1 WHERE id = 1")
            conn.commit()
    finally:
        conn.close()
    assert changed(before, snap()) == []


def test_sqlite_snapshot_sees_a_write(sqlite_copy: DbEnv) -> None:
    import sqlite3

    before = sqlite_snapshot(sqlite_copy.canary)
    conn = sqlite3.connect(sqlite_copy.canary / "demo.db")
    conn.execute("UPDATE sales_demo SET units = units + 1 WHERE id = 1")
    conn.commit()
    conn.close()
    assert changed(before, sqlite_snapshot(sqlite_copy.canary)) == ["files"]
