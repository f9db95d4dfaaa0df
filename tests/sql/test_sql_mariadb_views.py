"""Red team rt15my F3: a view the login can read calls what admission refuses in query text.

Before: an `SQL SECURITY INVOKER` view over `GET_LOCK('x', 0)` passed `mcpkit sql doctor`, and
`SELECT g FROM v_lock` took a server-wide named lock (admission sees only the view's name). Now
every readable view's definition passes the function policy of query text, a view whose definition
the login cannot read (no SHOW VIEW) is refused, `mcpkit sql grant` grants SHOW VIEW on a view, and
a view redefined while serving is verified again.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator

import pymysql
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy.engine import make_url

from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import AccountReport
from tests.helpers import ROOT
from tests.sql.sql_support import mysql_admin

pytestmark = pytest.mark.mysql


class _Db:
    def __init__(self, url: str, tag: str) -> None:
        self.url, self.db, self.user = url, f"myviews_{tag}_db", f"myviews_{tag}_r"
        self.lock = f"myviews_{tag}_lock"
        self.login = make_url(url).set(username=self.user, password=None, database=self.db)

    def run(self, *statements: str) -> None:
        admin = mysql_admin(self.url)
        try:
            with admin.cursor() as c:
                for sql in statements:
                    c.execute(sql)
        finally:
            admin.close()

    def report(self) -> AccountReport:
        engine = SqlEngine(self.login.render_as_string(False))
        try:
            return inspect_account(engine)
        finally:
            engine.close()

    def found(self, *codes: str) -> list[object]:
        return [f for f in self.report().findings if f.code in codes]


@pytest.fixture
def scratch(mysql_url: str) -> Iterator[_Db]:
    s = _Db(mysql_url, secrets.token_hex(4))
    s.run(
        f"CREATE DATABASE {s.db}",
        f"CREATE TABLE {s.db}.t (a INT)",
        f"INSERT INTO {s.db}.t VALUES (1)",
        f"CREATE USER '{s.user}'@'%' WITH MAX_USER_CONNECTIONS 7",
        f"GRANT SELECT ON {s.db}.t TO '{s.user}'@'%'",
    )
    yield s
    s.run(f"DROP DATABASE {s.db}", f"DROP USER IF EXISTS '{s.user}'@'%'")


def _lock_holder(url: str, lock: str) -> object:
    admin = mysql_admin(url)
    try:
        with admin.cursor() as c:
            c.execute("SELECT IS_USED_LOCK(%s)", [lock])
            return c.fetchone()[0]
    finally:
        admin.close()


@pytest.mark.parametrize(
    "body",
    ["GET_LOCK('{lock}', 0) AS g", "RELEASE_ALL_LOCKS() AS g", "SLEEP(0) AS g", "CONNECTION_ID() AS g"],
)
def test_an_invoker_view_calling_a_refused_function_is_refused_then_clean(scratch: _Db, body: str) -> None:
    s = scratch
    s.run(
        f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_f AS SELECT {body.format(lock=s.lock)}",
        f"GRANT SELECT, SHOW VIEW ON {s.db}.v_f TO '{s.user}'@'%'",
    )
    found = s.found("view-function")
    assert [f.opt_in for f in found] == [f"view:{s.db}.v_f"], s.report().findings  # type: ignore[attr-defined]
    fix = found[0].fix.split("; or ")[0]  # type: ignore[attr-defined]
    assert fix == f"REVOKE SELECT ON `{s.db}`.`v_f` FROM `{s.user}`@`%`", fix
    with pytest.raises(SqlConfigError, match=f"view {s.db}.v_f"):
        ensure_safe_account(s.report())
    ensure_safe_account(s.report(), allow=[f"view:{s.db}.v_f"])  # a reviewed one, by name
    s.run(fix)
    assert s.found("view-function", "unreadable-view") == []
    ensure_safe_account(s.report())


def test_the_get_lock_view_took_a_server_wide_lock_and_is_no_longer_served(scratch: _Db) -> None:
    s = scratch
    s.run(
        f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_lock AS SELECT GET_LOCK('{s.lock}', 0) AS g",
        f"GRANT SELECT, SHOW VIEW ON {s.db}.v_lock TO '{s.user}'@'%'",
    )
    reader = pymysql.connect(host="127.0.0.1", port=3306, user=s.user, database=s.db)
    try:  # the route is real: naming the view takes the lock for the session
        with reader.cursor() as c:
            c.execute("SELECT g FROM v_lock")
            assert c.fetchone()[0] == 1
        assert _lock_holder(s.url, s.lock) is not None
    finally:
        reader.close()
    report = s.report()
    assert "GET_LOCK" in str([f.message for f in report.findings]).upper()
    with pytest.raises(SqlConfigError, match="v_lock"):
        ensure_safe_account(report)


def test_a_view_whose_definition_is_hidden_is_refused_until_show_view(scratch: _Db) -> None:
    s = scratch
    s.run(
        f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_ok AS SELECT a FROM {s.db}.t",
        f"GRANT SELECT ON {s.db}.v_ok TO '{s.user}'@'%'",
    )
    (found,) = s.found("unreadable-view")
    fix = found.fix.split("; or ")[0]  # type: ignore[attr-defined]
    assert fix == f"GRANT SHOW VIEW ON `{s.db}`.`v_ok` TO '{s.user}'@'%'", fix
    with pytest.raises(SqlConfigError, match="SHOW VIEW"):
        ensure_safe_account(s.report())
    s.run(fix)  # the definition is read now, and it calls nothing refused
    assert s.found("view-function", "unreadable-view") == []
    ensure_safe_account(s.report())


def test_grant_prints_show_view_for_a_view_so_its_login_starts_clean(scratch: _Db) -> None:
    s = scratch
    s.run(f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_ok AS SELECT a FROM {s.db}.t")
    role = f"{s.user[:-2]}_g"
    engine = SqlEngine(make_url(s.url).set(database=s.db).render_as_string(False))
    try:
        with engine.sa_engine.connect() as conn:
            script = engine.profile.grant(conn, role, [f"{s.db}.t", f"{s.db}.v_ok"], "pw-myviews")
    finally:
        engine.close()
    assert f"GRANT SHOW VIEW ON `{s.db}`.`v_ok` TO '{role}'@'%'" in script, script
    assert f"GRANT SELECT ON `{s.db}`.`v_ok` TO '{role}'@'%'" in script, script
    assert f"GRANT SELECT ON `{s.db}`.`t` TO '{role}'@'%'" in script, script
    try:
        s.run(*script)
        login = make_url(s.url).set(username=role, password="pw-myviews", database=s.db)
        engine = SqlEngine(login.render_as_string(False))
        try:
            ensure_safe_account(inspect_account(engine))
        finally:
            engine.close()
    finally:
        s.run(f"DROP USER IF EXISTS '{role}'@'%'")


async def _serving_calls(dsn: str, redefine: list[str], url: str) -> list[str]:
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", dsn, "--no-audit", "--catalog-check-interval", "0"]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=dict(os.environ))
    codes = []
    async with Client(params, mode="legacy") as client:
        for step in ("before", "after"):
            if step == "after":
                admin = mysql_admin(url)
                with admin.cursor() as c:
                    for sql in redefine:
                        c.execute(sql)
                admin.close()
            result = await client.call_tool("execute_query", {"query": "SELECT a FROM v_ok"})
            codes.append(str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK")))
    return codes


@pytest.mark.anyio
async def test_a_view_redefined_while_serving_is_verified_again(scratch: _Db) -> None:
    s = scratch
    s.run(
        f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_ok AS SELECT a FROM {s.db}.t",
        f"GRANT SELECT, SHOW VIEW ON {s.db}.v_ok TO '{s.user}'@'%'",
    )
    redefine = [
        f"CREATE OR REPLACE SQL SECURITY INVOKER VIEW {s.db}.v_ok AS SELECT GET_LOCK('{s.lock}', 0) AS a"
    ]
    codes = await _serving_calls(s.login.render_as_string(False), redefine, s.url)
    assert codes == ["OK", "SOURCE_UNVERIFIED"], codes
    assert _lock_holder(s.url, s.lock) is None
