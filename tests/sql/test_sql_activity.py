"""Other sessions' SQL text never reaches the agent (red team, issue 10, break 1).

A canary session of the *same* account runs a query carrying a secret literal, as a second mcpkit
server on that account would. Every spelling of the relations that show it is refused by
admission, the refusal names the relation, and the literal is in no answer. With admission
switched off (test-only) the same query does return the literal: the test can fail.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pymysql
import pytest
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import Admitted
from mcpkit.sql.checks import inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv, pg_admin

SLEEP_S = 6


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    return Admitted(sql=sql, tree=exp.Select())


def _in_flight(run: Any) -> Iterator[str]:
    """Run `run(secret)` in a thread (a query sleeping with the secret in its text); yield the secret."""
    secret = f"canary_{secrets.token_hex(6)}"
    worker = threading.Thread(target=run, args=(secret,), daemon=True)
    worker.start()
    time.sleep(0.8)
    yield secret
    worker.join(SLEEP_S + 5)


@pytest.fixture
def pg_secret(pg_env: DbEnv) -> Iterator[str]:
    url = make_url(pg_env.ro_url).set(drivername="postgresql").render_as_string(hide_password=False)

    def run(secret: str) -> None:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"SELECT pg_sleep({SLEEP_S}), '{secret}' AS s")

    yield from _in_flight(run)


PG_SPELLINGS = [
    "SELECT pid, query FROM pg_stat_activity",
    'SELECT pid, query FROM pg_catalog."pg_stat_activity"',
    'SELECT pid, query FROM "pg_catalog".pg_stat_activity',
    "select PID, QUERY from PG_CATALOG.PG_STAT_ACTIVITY",
    "SELECT q FROM (SELECT query AS q FROM pg_stat_activity) s",
    "WITH a AS (SELECT query FROM pg_stat_activity) SELECT * FROM a",
    "SELECT 1 AS x WHERE EXISTS (SELECT 1 FROM pg_stat_activity WHERE query LIKE '%canary%')",
    "SELECT pid, mode FROM pg_locks",
    "SELECT * FROM pg_catalog.pg_prepared_xacts",
    "SELECT name, setting FROM pg_settings",
]


@pytest.mark.postgres
def test_pg_activity_relations_are_refused_and_the_literal_never_reaches_the_agent(
    pg_env: DbEnv, pg_secret: str
) -> None:
    engine = SqlEngine(pg_env.ro_url)
    try:
        service = SqlService(engine, timeout_s=3.0)
        for sql in PG_SPELLINGS:
            with pytest.raises(Refused) as refused:
                service.query(sql, call_id="activity", max_rows=50)
            assert (refused.value.data or {}).get("reason") == "relation", sql
            name = "pg_locks" if "pg_locks" in sql else "pg_prepared_xacts" if "xacts" in sql else ""
            assert (name or "pg_s") in str(refused.value) and pg_secret not in str(refused.value)
        # The control: without admission the database itself shows the canary's text to this role.
        service._admit = _passthrough  # type: ignore[method-assign]
        shown = service.query("SELECT query FROM pg_stat_activity", call_id="control", max_rows=50)
        assert pg_secret in repr(shown), "the canary query was not in flight: the test proves nothing"
    finally:
        engine.close()


@pytest.mark.postgres
def test_pg_start_up_refuses_a_granted_view_over_the_activity_relations(pg_env: DbEnv) -> None:
    tag = secrets.token_hex(4)
    schema = f"mcpkit_act_{tag}"
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE VIEW {schema}.locks AS SELECT pid, mode FROM pg_catalog.pg_locks")
        c.execute(f"CREATE VIEW {schema}.xacts AS SELECT gid FROM pg_prepared_xacts")
        c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {pg_env.ro_user}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {pg_env.ro_user}")
    engine = SqlEngine(pg_env.ro_url)
    try:
        lines = [f.line() for f in inspect_account(engine).findings]
    finally:
        engine.close()
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"DROP SCHEMA {schema} CASCADE")
    text = "\n".join(lines)
    assert f"relation {schema}.locks reads pg_catalog.pg_locks" in text, text
    assert f"REVOKE SELECT ON {schema}.locks FROM {pg_env.ro_user}" in text, text
    assert f"relation {schema}.xacts reads pg_catalog.pg_prepared_xacts" in text, text


MY_SPELLINGS = [
    "SELECT ID, USER, INFO FROM information_schema.PROCESSLIST",
    "SELECT ID, INFO FROM `INFORMATION_SCHEMA`.`processlist`",
    "SELECT i FROM (SELECT INFO AS i FROM information_schema.processlist) s",
    "SELECT trx_query FROM information_schema.INNODB_TRX",
    "SELECT * FROM performance_schema.events_statements_current",
    "SELECT * FROM sys.processlist",
    "SELECT User FROM mysql.user",
]


@pytest.mark.mysql
def test_mariadb_processlist_is_refused_and_the_literal_never_reaches_the_agent(mysql_env: DbEnv) -> None:
    url = make_url(mysql_env.ro_url)

    def run(secret: str) -> None:
        conn = pymysql.connect(host=url.host, port=url.port or 3306, user=url.username, database=url.database)
        try:
            with conn.cursor() as c:
                c.execute(f"SELECT SLEEP({SLEEP_S}), '{secret}' AS s")
        finally:
            conn.close()

    for secret in _in_flight(run):
        engine = SqlEngine(mysql_env.ro_url)
        try:
            service = SqlService(engine, timeout_s=3.0)
            for sql in MY_SPELLINGS:
                with pytest.raises(Refused) as refused:
                    service.query(sql, call_id="activity", max_rows=50)
                assert (refused.value.data or {}).get("reason") == "relation", sql
                assert secret not in str(refused.value)
            service._admit = _passthrough  # type: ignore[method-assign]
            shown = service.query("SELECT INFO FROM information_schema.PROCESSLIST", call_id="c", max_rows=50)
            assert secret in repr(shown), "the canary query was not in flight: the test proves nothing"
        finally:
            engine.close()


@pytest.mark.postgres
def test_pg_read_all_settings_membership_is_flagged_and_paths_stay_out_of_answers(pg_env: DbEnv) -> None:
    role = f"mcpkit_set_{secrets.token_hex(4)}"
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"CREATE ROLE {role} LOGIN IN ROLE pg_read_all_settings")
    url = make_url(pg_env.ro_url).set(username=role).render_as_string(hide_password=False)
    engine = SqlEngine(url)
    try:
        found = [f for f in inspect_account(engine).findings if f.code == "pg_read_all_settings"]
        assert found and found[0].fix.startswith(f"REVOKE pg_read_all_settings FROM {role}"), found
        assert found[0].opt_in == "read-all-settings"
        service = SqlService(engine, timeout_s=3.0)
        for sql in ("SELECT setting FROM pg_settings WHERE name = 'data_directory'",
                    "SELECT current_setting('data_directory') AS d"):  # fmt: skip
            with pytest.raises(Refused):
                service.query(sql, call_id="settings", max_rows=5)
        # The control: the database shows the path to this member.
        service._admit = _passthrough  # type: ignore[method-assign]
        shown = service.query("SELECT setting FROM pg_settings WHERE name = 'data_directory'", call_id="c")
        assert "/" in repr(shown)
    finally:
        engine.close()
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"DROP ROLE {role}")
