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
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy.engine import make_url

from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import AccountReport
from tests.helpers import ROOT, run_mcpkit
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


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_mcpkit("sql", *args, timeout=120.0)


def _view_fails(done: subprocess.CompletedProcess[str], view: str) -> bool:
    return any(line.startswith("fail least privilege:") and view in line for line in done.stdout.splitlines())


def _policy_views(s: _Db, tmp_path: Path) -> tuple[str, str]:
    s.run(
        f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_zip AS SELECT COMPRESS(CONCAT('x', a)) AS z"
        f" FROM {s.db}.t",
        f"CREATE SQL SECURITY INVOKER VIEW {s.db}.v_up AS SELECT UPPER(CONCAT('x', a)) AS u FROM {s.db}.t",
        f"GRANT SELECT, SHOW VIEW ON {s.db}.v_zip TO '{s.user}'@'%'",
        f"GRANT SELECT, SHOW VIEW ON {s.db}.v_up TO '{s.user}'@'%'",
    )
    listed = tmp_path / "functions.txt"
    listed.write_text("concat\ncompress\n", encoding="utf-8")  # UPPER is not on the operator's list
    return s.login.render_as_string(False), str(listed)


# Before: view definitions met the default policy whatever the options: a function the operator
# allowed still refused its view, and one the operator's --functions list left out passed.
def test_a_view_calling_an_operator_allowed_function_is_accepted(scratch: _Db, tmp_path: Path) -> None:
    s = scratch
    dsn, _ = _policy_views(s, tmp_path)
    default = _cli("doctor", "--dsn", dsn)
    assert _view_fails(default, f"view {s.db}.v_zip") and not _view_fails(default, f"view {s.db}.v_up")
    allowed = _cli("doctor", "--dsn", dsn, "--allow-function", "compress")
    assert not _view_fails(allowed, f"view {s.db}.v_zip"), allowed.stdout
    assert allowed.returncode == 0, allowed.stdout
    # serve and query start under the same policy
    assert _cli("query", "--dsn", dsn, "SELECT a FROM t").returncode == 2
    done = _cli("query", "--dsn", dsn, "--allow-function", "compress", "SELECT LENGTH(z) AS n FROM v_zip")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_view_calling_a_function_the_operator_left_out_is_refused(scratch: _Db, tmp_path: Path) -> None:
    s = scratch
    dsn, listed = _policy_views(s, tmp_path)
    own_list = _cli("doctor", "--dsn", dsn, "--functions", listed)
    assert _view_fails(own_list, f"view {s.db}.v_up"), own_list.stdout
    assert not _view_fails(own_list, f"view {s.db}.v_zip")
    refused = _cli("query", "--dsn", dsn, "--functions", listed, "SELECT a FROM t")
    assert refused.returncode == 2 and "v_up" in refused.stderr, refused.stderr


def test_views_of_a_database_read_without_show_view_make_one_finding_and_one_grant(scratch: _Db) -> None:
    # Before: SELECT ON db.* and no SHOW VIEW printed one start-up line per view (40 views: 40 lines).
    s = scratch
    views = [f"v_{i}" for i in range(7)]
    s.run(
        *(f"CREATE SQL SECURITY INVOKER VIEW {s.db}.{v} AS SELECT a FROM {s.db}.t" for v in views),
        f"GRANT SELECT ON {s.db}.* TO '{s.user}'@'%'",
    )
    found = s.found("unreadable-view")
    assert len(found) == 1, found
    (finding,) = found
    assert finding.fix == f"GRANT SHOW VIEW ON `{s.db}`.* TO '{s.user}'@'%'", finding.fix  # type: ignore[attr-defined]
    assert f"7 views in {s.db} (v_0, v_1, v_2, v_3, v_4, ...)" in finding.message  # type: ignore[attr-defined]
    with pytest.raises(SqlConfigError) as info:
        ensure_safe_account(s.report())
    assert str(info.value).count("SHOW VIEW ON") == 1, info.value
    s.run(finding.fix)  # type: ignore[attr-defined]
    assert s.found("view-function", "unreadable-view") == []
    ensure_safe_account(s.report())


def test_a_login_per_principal_checks_its_views_under_the_same_policy(mysql_url: str) -> None:
    from mcpkit.sql.admission import FunctionPolicy

    engine = SqlEngine(mysql_url)
    policy = FunctionPolicy.for_dialect("mysql", extra=["compress"])
    engine.profile.use_function_policy(policy)
    other = engine.for_login("someone", None)  # what a role map's one login per principal builds
    try:
        assert other.profile.function_policy is policy
    finally:
        other.close()
        engine.close()
