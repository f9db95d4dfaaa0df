"""Red team rtJ, L1: on MariaDB `mcpkit sql grant` printed SELECT (and SHOW VIEW) on a SQL SECURITY
DEFINER view, and on an INVOKER view calling a function queries may not call, both of which
`doctor` then refused. Now each is left out with a `-- left out:` line saying why, as PostgreSQL's
trial does, and the printed script starts clean."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from tests.helpers import run_mcpkit
from tests.sql.sql_support import mysql_admin

pytestmark = pytest.mark.mysql


@pytest.fixture
def operator_db(mysql_url: str) -> Iterator[tuple[str, str]]:
    db = f"mk_rtjgr_{secrets.token_hex(4)}"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.accounts (id INT PRIMARY KEY, owner VARCHAR(20), balance INT)")
        c.execute(f"INSERT INTO {db}.accounts VALUES (1, 'ann', 10)")
        c.execute(
            f"CREATE DEFINER=root@localhost SQL SECURITY DEFINER VIEW {db}.v_acc AS"
            f" SELECT id, owner, balance FROM {db}.accounts"
        )
        c.execute(f"CREATE FUNCTION {db}.f_touch() RETURNS INT SQL SECURITY INVOKER RETURN 1")
        c.execute(
            f"CREATE SQL SECURITY INVOKER VIEW {db}.v_touch AS"
            f" SELECT id, {db}.f_touch() AS t FROM {db}.accounts"
        )
        c.execute(f"CREATE SQL SECURITY INVOKER VIEW {db}.v_ok AS SELECT id, owner FROM {db}.accounts")
    try:
        yield make_url(mysql_url).set(database=db).render_as_string(hide_password=False), db
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
        admin.close()


def test_grant_leaves_out_the_views_start_up_refuses(operator_db: tuple[str, str]) -> None:
    admin_url, db = operator_db
    user = f"mk_rtjgr_{secrets.token_hex(4)}"
    tables = f"{db}.accounts,{db}.v_acc,{db}.v_touch,{db}.v_ok"
    done = run_mcpkit("sql", "grant", "--dsn", admin_url, "--role", user, "--tables", tables)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    left = [x for x in lines if x.startswith("-- left out:")]
    assert any(f"view {db}.v_acc runs as its definer root@localhost" in x for x in left), done.stdout
    assert any(f"view {db}.v_touch's definition calls" in x and "f_touch" in x for x in left), done.stdout
    granted = [x for x in lines if x.startswith("GRANT")]
    assert not any("v_acc" in x or "v_touch" in x for x in granted), granted
    assert any("`v_ok`" in x for x in granted) and any("`accounts`" in x for x in granted), granted
    statements = [x.rstrip(";") for x in lines if x and not x.startswith("--")]
    password = statements[0].split("IDENTIFIED BY '")[1].split("'")[0]
    admin = mysql_admin(admin_url)
    try:
        with admin.cursor() as c:
            for statement in statements:
                c.execute(statement)
        url = make_url(admin_url).set(username=user, password=password).render_as_string(hide_password=False)
        doctor = run_mcpkit("sql", "doctor", "--dsn", url)
        assert "fail " not in doctor.stdout, doctor.stdout
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()
