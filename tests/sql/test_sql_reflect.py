"""Reflection and start-up checks against the real databases, as least-privilege accounts."""

from __future__ import annotations

import logging

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.checks import ensure_safe_account, inspect_account, probe_read_only, probe_timeout
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.reflect import describe_table, list_tables
from tests.sql.sql_support import DbEnv

ENVS = [
    pytest.param("sqlite_env", id="sqlite"),
    pytest.param("pg_env", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql_env", id="mysql", marks=pytest.mark.mysql),
]


@pytest.mark.parametrize("env_name", ENVS)
def test_list_and_describe(env_name: str, request: pytest.FixtureRequest) -> None:
    env: DbEnv = request.getfixturevalue(env_name)
    engine = SqlEngine(env.ro_url)
    try:
        tables = list_tables(engine, call_id="t", schema=env.schema if env.dialect != "sqlite" else None)
        names = {t.name for t in tables.tables}
        assert {"sales_demo", "product_vectors"} <= names
        if env.dialect == "postgres":
            sales = next(t for t in tables.tables if t.name == "sales_demo")
            assert sales.row_estimate == 3000  # ANALYZE ran when the demo was loaded
        d = describe_table(engine, "sales_demo", call_id="d", schema=None)
        cols = {c.name: c for c in d.columns}
        assert list(cols)[:3] == ["id", "region", "product"]
        assert d.primary_key == ["id"] and cols["id"].primary_key
        assert not cols["region"].nullable and cols["notes"].nullable
        if env.dialect != "sqlite":
            assert d.comment == "Demo sales deals, 2021-2024"
            assert cols["revenue"].comment == "Net revenue in USD"
    finally:
        engine.close()


@pytest.mark.parametrize("env_name", ENVS)
def test_describe_refuses_unknown_and_injected_names(env_name: str, request: pytest.FixtureRequest) -> None:
    env: DbEnv = request.getfixturevalue(env_name)
    engine = SqlEngine(env.ro_url)
    try:
        for name in ("nope", "sales_demo'); DROP TABLE sales_demo; --", 'sales_demo") --'):
            with pytest.raises(Refused) as info:
                describe_table(engine, name, call_id="d")
            assert info.value.data == {"reason": "not_found"}
            assert "sales_demo" not in info.value.message
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_lists_only_readable_tables(pg_env: DbEnv) -> None:
    url = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE TABLE {pg_env.schema}.hidden_salaries (x int)")
    try:
        engine = SqlEngine(pg_env.ro_url)
        names = {t.name for t in list_tables(engine, call_id="t").tables}
        engine.close()
        assert "sales_demo" in names and "hidden_salaries" not in names
    finally:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"DROP TABLE {pg_env.schema}.hidden_salaries")


@pytest.mark.postgres
def test_postgres_accounts(pg_env: DbEnv, caplog: pytest.LogCaptureFixture) -> None:
    admin = SqlEngine(pg_env.admin_url)
    report = inspect_account(admin)
    admin.close()
    assert report.superuser and report.superuser_reason == "rolsuper"
    with pytest.raises(SqlConfigError, match="NOSUPERUSER"):
        ensure_safe_account(report)
    # --allow-superuser accepts the role attribute only: what the superuser owns stays refused.
    with pytest.raises(SqlConfigError) as caught:
        ensure_safe_account(report, allow_superuser=True)
    assert "NOSUPERUSER" not in str(caught.value) and "owns" in str(caught.value)

    ro = SqlEngine(pg_env.ro_url)
    ro_report = inspect_account(ro)
    assert not ro_report.superuser and ro_report.writable == [] and ro_report.user == pg_env.ro_user
    assert ro_report.findings == []
    assert probe_read_only(ro).ok and probe_timeout(ro).ok
    ro.close()

    rw = SqlEngine(pg_env.rw_url)
    rw_report = inspect_account(rw)
    rw.close()
    assert f"{pg_env.schema}.sales_demo" in rw_report.writable
    with pytest.raises(SqlConfigError, match=f"REVOKE CREATE ON SCHEMA {pg_env.schema} FROM"):
        ensure_safe_account(rw_report)
    with caplog.at_level(logging.WARNING, logger="mcpkit.sql"):
        ensure_safe_account(rw_report, allow=["create-schema"])
    assert "can write" in caplog.text and "as --allow create-schema asked" in caplog.text


@pytest.mark.mysql
def test_mysql_accounts(mysql_env: DbEnv) -> None:
    admin = SqlEngine(mysql_env.admin_url)
    report = inspect_account(admin)
    admin.close()
    assert report.superuser and "SUPER" in (report.superuser_reason or "")
    with pytest.raises(SqlConfigError, match=r"REVOKE FILE ON \*\.\*"):
        ensure_safe_account(report)

    ro = SqlEngine(mysql_env.ro_url)
    ro_report = inspect_account(ro)
    assert not ro_report.superuser and ro_report.writable == [] and ro_report.findings == []
    assert probe_read_only(ro).ok and probe_timeout(ro).ok
    ro.close()

    rw = SqlEngine(mysql_env.rw_url)
    login = f"`{mysql_env.rw_user}`@`%`"
    assert inspect_account(rw).writable == [
        f"{p} ON `{mysql_env.schema}`.* (REVOKE {p} ON `{mysql_env.schema}`.* FROM {login})"
        for p in ("INSERT", "UPDATE", "DELETE")
    ]
    rw.close()


def test_sqlite_account(sqlite_env: DbEnv) -> None:
    engine = SqlEngine(sqlite_env.ro_url)
    report = inspect_account(engine)
    assert not report.superuser and report.writable  # the file is writable by this process
    assert probe_read_only(engine).ok and probe_timeout(engine).ok
    engine.close()


def test_sqlite_needs_an_existing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for url in ("sqlite://", "sqlite:///:memory:", f"sqlite:///{tmp_path}/missing.db"):
        with pytest.raises(SqlConfigError):
            SqlEngine(url)
