"""Engine details on the real servers: call identity, cost ceiling, the volatility catalog."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pymysql
import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.engines.base import Params, Rows
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.profiles import PostgresCatalog
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv

SLOW = "SELECT count(*) FROM sales_demo a, sales_demo b, sales_demo c"


def _run_slow(env: DbEnv, call_id: str) -> threading.Thread:
    def work() -> None:
        engine = SqlEngine(env.ro_url)
        try:
            engine.execute(SLOW, None, 1, 3.0, call_id)
        except QueryTimeout:
            pass
        finally:
            engine.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


@pytest.mark.postgres
def test_postgres_session_carries_the_call_id(pg_env: DbEnv) -> None:
    thread = _run_slow(pg_env, "trace-me-1")
    url = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    seen: list[Any] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(40):
            seen = conn.execute(
                "SELECT application_name, usename, state FROM pg_stat_activity"
                " WHERE application_name LIKE 'mcpkit:%%' AND usename = %s",  # not other sessions' servers
                [pg_env.ro_user],
            ).fetchall()
            if any(state == "active" for _, _, state in seen):
                break
            time.sleep(0.05)
    thread.join()
    assert ("mcpkit:trace-me-1", pg_env.ro_user, "active") in seen


@pytest.mark.mysql
def test_mysql_statement_carries_the_call_id(mysql_env: DbEnv) -> None:
    thread = _run_slow(mysql_env, "trace-me-2")
    u = make_url(mysql_env.admin_url)
    conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password="")
    seen: list[Any] = []
    try:
        with conn.cursor() as c:
            for _ in range(40):
                c.execute(
                    "SELECT USER, INFO FROM information_schema.PROCESSLIST"
                    " WHERE INFO LIKE '/* mcpkit:%%' AND USER = %s",  # not other sessions' servers
                    [mysql_env.ro_user],
                )
                seen = list(c.fetchall())
                if seen:
                    break
                time.sleep(0.05)
    finally:
        conn.close()
    thread.join()
    # on MariaDB the query runs under its temporary-table cap: `SET STATEMENT ... FOR SELECT ...`
    assert seen and seen[0][0] == mysql_env.ro_user and seen[0][1].startswith("/* mcpkit:trace-me-2 */ ")
    assert "SELECT count(*) FROM sales_demo" in seen[0][1]


@pytest.mark.postgres
def test_postgres_cost_ceiling(pg_env: DbEnv) -> None:
    engine = SqlEngine(pg_env.ro_url)
    try:
        service = SqlService(engine, max_cost=1000.0)
        result, _ = service.query("SELECT count(*) FROM product_vectors WHERE id = 1", call_id="cheap")
        assert result.row_count == 1
        with pytest.raises(Refused) as info:
            service.query(SLOW, call_id="dear")
        assert info.value.data == {"reason": "cost"} and "ceiling of 1000" in info.value.message
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_cost_ceiling_counts_rows_examined(mysql_env: DbEnv) -> None:
    engine = SqlEngine(mysql_env.ro_url)
    try:
        service = SqlService(engine, max_cost=100_000.0)
        result, _ = service.query("SELECT count(*) FROM sales_demo WHERE id = 1", call_id="cheap")
        assert result.row_count == 1
        # Each of these examines millions of rows; MariaDB's own Last_query_cost calls the union and
        # the correlated subquery 0, which is why the estimate is read from the plan's rows.
        for dear in (
            SLOW,
            "SELECT 1 AS x UNION ALL SELECT count(*) FROM sales_demo a, sales_demo b",
            "SELECT (SELECT count(*) FROM sales_demo b WHERE b.units > a.units) AS n FROM sales_demo a",
            "SELECT count(*) FROM (SELECT a.id FROM sales_demo a, sales_demo b) AS d",
        ):
            with pytest.raises(Refused) as info:
                service.query(dear, call_id="dear")
            assert info.value.data == {"reason": "cost"}, dear
            assert "ceiling of 100000" in info.value.message
    finally:
        engine.close()


class CountingEngine:
    """Wraps an engine and counts the statements it runs."""

    def __init__(self, inner: SqlEngine) -> None:
        self.inner, self.calls = inner, 0
        self.dialect = inner.dialect

    def execute(self, sql: str, params: Params | None, limit: int, timeout_s: float, call_id: str) -> Rows:
        self.calls += 1
        return self.inner.execute(sql, params, limit, timeout_s, call_id)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.postgres
def test_postgres_catalog_reads_provolatile_and_caches(pg_env: DbEnv) -> None:
    engine = CountingEngine(SqlEngine(pg_env.ro_url))
    try:
        catalog = PostgresCatalog(engine)
        refs = [
            (None, "bump_audit"),
            (pg_env.schema, "bump_audit"),
            (None, "lower"),
            (None, "random"),
            (None, "nextval"),
        ]
        assert catalog.volatile(refs) == {
            (None, "bump_audit"),
            (pg_env.schema, "bump_audit"),
            (None, "nextval"),
        }
        calls = engine.calls
        assert catalog.volatile(refs[:3]) == {(None, "bump_audit"), (pg_env.schema, "bump_audit")}
        assert engine.calls == calls  # answered from the cache
        assert catalog.volatile([("public", "bump_audit")]) == set()  # not that schema's function
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_time_values_read_as_mariadb_writes_them(mysql_env: DbEnv) -> None:
    # Red team my11 F5: PyMySQL reads TIME as a timedelta, whose str() was `-1 day, 23:00:00`.
    engine = SqlEngine(mysql_env.ro_url)
    try:
        sql = "SELECT TIME('-01:00:00') AS a, TIME('48:00:00') AS b, TIME('12:30:00.250000') AS c"
        result, _ = SqlService(engine).query(sql, call_id="times")
        direct = pymysql.connect(**_mysql_kwargs(mysql_env.ro_url))
        try:
            with direct.cursor() as cur:
                cur.execute("SELECT CAST(TIME('-01:00:00') AS CHAR), CAST(TIME('48:00:00') AS CHAR)")
                own = list(cur.fetchone())
        finally:
            direct.close()
        assert result.rows == [[*own, "12:30:00.25"]] == [["-01:00:00", "48:00:00", "12:30:00.25"]]
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_intervals_read_as_postgres_writes_them(pg_env: DbEnv) -> None:
    # psycopg's timedelta counts a month as 30 days: `1 mon` read `720:00:00`, a year `8640:00:00`.
    engine = SqlEngine(pg_env.ro_url)
    try:
        sql = (
            "SELECT interval '1 mon' AS a, interval '1 year 2 mons 3 days' AS b,"
            " interval '-1 day 02:00:00' AS c, ARRAY[interval '1 mon'] AS d"
        )
        result, _ = SqlService(engine).query(sql, call_id="intervals")
        with psycopg.connect(_pg_conninfo(pg_env.ro_url)) as direct:
            row = direct.execute(
                "SELECT interval '1 mon'::text, interval '1 year 2 mons 3 days'::text,"
                " interval '-1 day 02:00:00'::text"
            ).fetchone()
        assert row is not None
        assert result.rows == [[*row, [row[0]]]]
        assert result.rows[0][:3] == ["1 mon", "1 year 2 mons 3 days", "-1 days +02:00:00"]
    finally:
        engine.close()


def _pg_conninfo(url: str) -> str:
    u = make_url(url)
    return f"host={u.host} port={u.port or 5432} user={u.username} dbname={u.database}"


def _mysql_kwargs(url: str) -> dict[str, Any]:
    u = make_url(url)
    return {"host": u.host, "port": u.port or 3306, "user": u.username, "password": u.password or "",
            "database": u.database}  # fmt: skip
