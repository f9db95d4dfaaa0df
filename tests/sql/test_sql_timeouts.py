"""Queries that would run forever come back within the timeout, and the server still answers.

Both layers are tested: the database's own limit (statement_timeout, max_statement_time, the
SQLite progress handler), and the engine's watchdog that interrupts from another thread when the
database's limit is missing.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pymysql
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.profiles import MysqlProfile, PostgresProfile, SqliteProfile
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv

LIMIT_S = 1.5
SLACK_S = 2.5  # connection set-up, the watchdog's grace, a loaded CI machine

RECURSIVE = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
CROSS = "SELECT count(*) FROM sales_demo a, sales_demo b, sales_demo c"
FOREVER = {
    "postgres": [RECURSIVE, CROSS, "SELECT count(*) FROM generate_series(1, 100000000000) g"],
    "sqlite": [RECURSIVE, CROSS],
    "mysql": [
        CROSS,
        "SELECT count(*) FROM sales_demo a JOIN sales_demo b ON a.notes LIKE CONCAT('%', b.notes, '%')",
    ],
}


def _times_out(service: SqlService, sql: str) -> float:
    started = time.monotonic()
    with pytest.raises(QueryTimeout) as info:
        service.query(sql, call_id="forever")
    took = time.monotonic() - started
    assert info.value.code == "TIMEOUT" and info.value.retryable
    assert took < LIMIT_S + SLACK_S, f"took {took:.1f} s"
    result, _ = service.query("SELECT 1 AS alive", call_id="after")
    assert result.rows == [[1]]
    return took


def _pg_running(env: DbEnv) -> list[Any]:
    url = make_url(env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE usename = %s AND state = 'active'", [env.ro_user]
        ).fetchall()


def _mysql_running(env: DbEnv) -> list[Any]:
    u = make_url(env.admin_url)
    conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password="")
    try:
        with conn.cursor() as c:
            c.execute(
                "SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE USER = %s AND COMMAND = 'Query'",
                [env.ro_user],
            )
            return list(c.fetchall())
    finally:
        conn.close()


@pytest.mark.postgres
@pytest.mark.parametrize("sql", FOREVER["postgres"])
def test_postgres_forever_query_stops(sql: str, pg_env: DbEnv) -> None:
    engine = SqlEngine(pg_env.ro_url)
    try:
        _times_out(SqlService(engine, timeout_s=LIMIT_S), sql)
    finally:
        engine.close()
    assert _pg_running(pg_env) == []


@pytest.mark.parametrize("sql", FOREVER["sqlite"])
def test_sqlite_forever_query_stops(sql: str, sqlite_env: DbEnv) -> None:
    engine = SqlEngine(sqlite_env.ro_url)
    try:
        _times_out(SqlService(engine, timeout_s=LIMIT_S), sql)
    finally:
        engine.close()


@pytest.mark.mysql
@pytest.mark.parametrize("sql", FOREVER["mysql"])
def test_mysql_forever_query_stops(sql: str, mysql_env: DbEnv) -> None:
    engine = SqlEngine(mysql_env.ro_url)
    try:
        _times_out(SqlService(engine, timeout_s=LIMIT_S), sql)
    finally:
        engine.close()
    assert _mysql_running(mysql_env) == []


# --- the watchdog alone -----------------------------------------------------------------------


class _PostgresNoLimit(PostgresProfile):
    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        super().begin(dbapi, 3600.0, call_id)


class _MysqlNoLimit(MysqlProfile):
    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        super().begin(dbapi, 3600.0, call_id)


class _SqliteNoLimit(SqliteProfile):
    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        super().begin(dbapi, 3600.0, call_id)


@pytest.mark.parametrize(
    ("env_name", "profile", "sql"),
    [
        pytest.param("pg_env", _PostgresNoLimit, RECURSIVE, marks=pytest.mark.postgres, id="postgres"),
        pytest.param("mysql_env", _MysqlNoLimit, CROSS, marks=pytest.mark.mysql, id="mysql"),
        pytest.param("sqlite_env", _SqliteNoLimit, RECURSIVE, id="sqlite"),
    ],
)
def test_watchdog_interrupts_when_the_database_limit_is_missing(
    env_name: str, profile: type[Any], sql: str, request: pytest.FixtureRequest
) -> None:
    env: DbEnv = request.getfixturevalue(env_name)
    engine = SqlEngine(env.ro_url, grace_s=0.5)
    engine.profile = profile()
    try:
        _times_out(SqlService(engine, timeout_s=LIMIT_S), sql)
    finally:
        engine.close()
