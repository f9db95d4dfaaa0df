"""Red team rtJ, F1/F2 (MariaDB): a VIRTUAL generated column runs its expression in the reader's
session each time a row is read, SQL the query text never names. `s AS (@v := CONCAT('seen', a))`
set a user variable (and crashed mariadbd 10.11 inside the read-only transaction); `AS (UUID())`,
`SYS_GUID()` (the host's MAC address) and `CONNECTION_ID()` answered what admission refuses by name.
Start-up now judges every readable VIRTUAL column's expression as admission judges a query
(`profiles.mysql.generated`). The variable-assigning column is only ever checked, never read here:
reading it crashes the shared server."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.profiles.mysql.generated import _refusal
from tests.helpers import run_mcpkit
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin


@pytest.mark.parametrize(
    ("expression", "refused"),
    [
        ("@`v` := concat('seen',`a`)", "variables"),  # as MariaDB 10.11 stores it
        ("@v := concat('seen', a)", "variables"),
        ("uuid()", "uuid"),
        ("sys_guid()", "sys_guid"),
        ("connection_id()", "connection_id"),
        ("concat(`a`,'x')", None),
        ("`a` + 1", None),
    ],
)
def test_a_virtual_columns_expression_is_judged_as_a_query(expression: str, refused: str | None) -> None:
    why = _refusal(expression, FunctionPolicy.for_dialect("mysql"))
    assert (why is None) if refused is None else (why is not None and refused in why), why


@pytest.fixture
def reader(mysql_url: str) -> Iterator[tuple[str, str, str]]:
    tag = secrets.token_hex(4)
    db, user = f"mk_rtjvc_{tag}", f"mk_rtjvc_{tag}_u"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(
            f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, ok INT AS (a + 1) VIRTUAL,"
            " u VARCHAR(64) AS (uuid()) VIRTUAL, c VARCHAR(64) AS (connection_id()) VIRTUAL,"
            " st INT AS (a * 2) STORED)"
        )
        c.execute(f"INSERT INTO {db}.t (id, a) VALUES (1, 1)")
        c.execute(
            f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
        )
        c.execute(f"GRANT SELECT ON {db}.t TO '{user}'@'%'")
    url = make_url(mysql_url).set(username=user, password="pw", database=db)
    try:
        yield url.render_as_string(hide_password=False), db, mysql_url
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
            c.execute(f"DROP USER '{user}'@'%'")
        admin.close()


@pytest.mark.mysql
def test_a_readable_virtual_column_running_a_refused_function_is_refused(
    reader: tuple[str, str, str],
) -> None:
    url, db, admin_url = reader
    done = run_mcpkit("sql", "doctor", "--dsn", url)
    line = next((x for x in done.stdout.splitlines() if f"table {db}.t" in x), "")
    assert done.returncode == 1 and line.startswith("fail least privilege:"), done.stdout
    assert "u: " in line and "c: " in line and "ok: " not in line and "st: " not in line, line
    assert f"REVOKE SELECT ON `{db}`.`t`" in line and f"--allow relation:{db}.t" in line, line
    accepted = run_mcpkit("sql", "doctor", "--dsn", url, "--allow", f"relation:{db}.t")
    assert not any(f"table {db}.t" in x and x.startswith("fail") for x in accepted.stdout.splitlines())
    admin = mysql_admin(admin_url)
    try:
        with admin.cursor() as c:
            c.execute(f"ALTER TABLE {db}.t DROP COLUMN u, DROP COLUMN c")
    finally:
        admin.close()
    done = run_mcpkit("sql", "doctor", "--dsn", url)
    assert f"table {db}.t" not in done.stdout, done.stdout


@pytest.mark.mysql
def test_grant_leaves_out_a_table_whose_virtual_column_start_up_refuses(reader: tuple[str, str, str]) -> None:
    _, db, admin_url = reader
    admin = make_url(admin_url).set(database=db).render_as_string(hide_password=False)
    done = run_mcpkit("sql", "grant", "--dsn", admin, "--role", "mk_rtjvc_x", "--tables", f"{db}.t")
    assert done.returncode == 0, done.stderr
    left = [x for x in done.stdout.splitlines() if x.startswith("-- left out:")]
    assert any(f"table {db}.t's VIRTUAL generated column" in x and "u: " in x for x in left), done.stdout
    assert not any(x.startswith("GRANT SELECT") for x in done.stdout.splitlines()), done.stdout
