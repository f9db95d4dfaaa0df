"""MariaDB's catalog fingerprint sees a routine's body, not only its last change (red team rt30 F3).

F3: the fingerprint keyed each routine by LAST_ALTERED, which has one-second resolution. A function
replaced twice within one second (v1, ordered, passes the re-verification of a call; v2, without
its ORDER BY, refused at start-up) kept the same row: with `--catalog-check-interval 0` every later
call answered the ids in e-mail order until the 300 s --reverify-interval. Now the fingerprint
digests each routine's body, SQL_MODE, return type and parameters.

Low: `SHOW GRANTS` lines come back in the order of the server's ACL hashes, which other accounts'
grants reshuffle; the fingerprint hashed them in that order (a needless full re-verification).
Now they are sorted.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.profiles.mysql import fingerprint
from mcpkit.sql.profiles.mysql.fingerprint import mysql_fingerprint
from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch

pytestmark = pytest.mark.mysql

# Ids out of e-mail order: in e-mail order they are 2, 4, 6, 5, 3, 1.
ROWS = "(1,'zed@x.io'),(2,'amy@x.io'),(3,'moe@x.io'),(4,'bea@x.io'),(5,'kip@x.io'),(6,'dot@x.io')"
IN_EMAIL_ORDER = "2,4,6,5,3,1"


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt30b_fp") as db:
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.customers (id INT PRIMARY KEY, email VARCHAR(80),"
                " UNIQUE KEY ek (email, id)) ENGINE=InnoDB"
            )
            c.execute(f"INSERT INTO {db.db}.customers VALUES {ROWS}")
            c.execute(f"GRANT SELECT (id) ON {db.db}.customers TO '{db.reader}'@'%'")
        yield db


def _function(db: MysqlScratch, body: str, params: str = "", mode: str | None = None) -> str:
    """CREATE OR REPLACE the reader's own INVOKER function `fo` (its body readable to it)."""
    mode_sql = f"SET STATEMENT sql_mode = '{mode}' FOR " if mode is not None else ""
    return (
        f"{mode_sql}CREATE OR REPLACE DEFINER = '{db.reader}'@'%' FUNCTION {db.db}.fo({params}) RETURNS TEXT"
        f" SQL SECURITY INVOKER READS SQL DATA RETURN ({body})"
    )


def _ordered(db: MysqlScratch) -> str:
    return f"SELECT GROUP_CONCAT(id ORDER BY id) FROM {db.db}.customers"


def _unordered(db: MysqlScratch) -> str:
    """v2: no ORDER BY; the ids come in the order of the e-mail index (covering for `id`)."""
    return f"SELECT GROUP_CONCAT(id) FROM {db.db}.customers FORCE INDEX (ek)"


def _last_altered(db: MysqlScratch) -> Any:
    with db.admin.cursor() as c:
        c.execute(
            "SELECT LAST_ALTERED FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s"
            " AND ROUTINE_NAME = 'fo'",
            [db.db],
        )
        return c.fetchone()[0]


def _same_second(db: MysqlScratch, first: str, then: Callable[[], object], second: str) -> None:
    """Run `first`, `then()` and `second` within one wall-clock second of the server (LAST_ALTERED
    equal: the case the old fingerprint missed); retried at the start of the next second if not."""
    for _ in range(5):
        while time.time() % 1 > 0.2:
            time.sleep(0.01)
        with db.admin.cursor() as c:
            c.execute(first)
        before = _last_altered(db)
        then()
        with db.admin.cursor() as c:
            c.execute(second)
        if _last_altered(db) == before:
            return
    pytest.fail("could not replace the function twice within one second")


@pytest.fixture
def reader(my: MysqlScratch) -> Iterator[pymysql.Connection[Any]]:
    conn = pymysql.connect(host="127.0.0.1", user=my.reader, password="pw", database=my.db, autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize(
    "change",
    ["body", "parameters", "sql_mode"],
)
def test_a_routine_replaced_twice_within_one_second_moves_the_fingerprint(
    my: MysqlScratch, reader: pymysql.Connection[Any], change: str
) -> None:
    v1 = _function(my, _ordered(my))
    v2 = {
        "body": _function(my, _unordered(my)),
        # a parameter named like the column: `ORDER BY id` then orders by the parameter, a constant
        "parameters": _function(my, _ordered(my), params="id INT"),
        "sql_mode": _function(my, _ordered(my), mode="NO_BACKSLASH_ESCAPES"),
    }[change]
    with my.admin.cursor() as c:
        c.execute(_function(my, "SELECT 'v0'"))
        c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.fo TO '{my.reader}'@'%'")
    seen: list[str] = []
    _same_second(my, v1, lambda: seen.append(mysql_fingerprint(reader)), v2)
    after = mysql_fingerprint(reader)
    assert after != seen[0], change
    assert mysql_fingerprint(reader) == after  # stable while nothing changes


def test_the_fingerprint_is_stable_while_nothing_changes(
    my: MysqlScratch, reader: pymysql.Connection[Any]
) -> None:
    role = f"{my.reader}_g"
    try:
        with my.admin.cursor() as c:
            c.execute(_function(my, _ordered(my)))
            c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.fo TO '{my.reader}'@'%'")
            c.execute(f"CREATE PROCEDURE {my.db}.fo() SELECT 1")  # same name as the function
            c.execute(f"CREATE VIEW {my.db}.v AS SELECT id FROM {my.db}.customers")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.v TO '{my.reader}'@'%'")
            c.execute(f"CREATE ROLE {role}")
            c.execute(f"GRANT SELECT ON {my.db}.v TO {role}")
            c.execute(f"GRANT {role} TO '{my.reader}'@'%'")
        first = mysql_fingerprint(reader)
        assert all(mysql_fingerprint(reader) == first for _ in range(20))
        with my.admin.cursor() as c:  # replaced as it was (VIEWS holds no timestamp)
            c.execute(f"CREATE OR REPLACE VIEW {my.db}.v AS SELECT id FROM {my.db}.customers")
        assert mysql_fingerprint(reader) == first
    finally:
        with my.admin.cursor() as c:
            c.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_view_replaced_with_its_definition_but_another_check_option_moves_it(
    my: MysqlScratch, reader: pymysql.Connection[Any]
) -> None:
    with my.admin.cursor() as c:
        c.execute(f"CREATE VIEW {my.db}.v AS SELECT id FROM {my.db}.customers")
        c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.v TO '{my.reader}'@'%'")
    first = mysql_fingerprint(reader)
    with my.admin.cursor() as c:
        c.execute(f"CREATE OR REPLACE VIEW {my.db}.v AS SELECT id FROM {my.db}.customers WITH CHECK OPTION")
    assert mysql_fingerprint(reader) != first


def test_show_grants_are_digested_as_a_set() -> None:
    lines = [
        ("GRANT USAGE ON *.* TO `u`@`%`",),
        ("GRANT SELECT (`id`) ON `d`.`t` TO `u`@`%`",),
        ("GRANT SELECT ON `d`.`v` TO `u`@`%`",),
        ("GRANT EXECUTE ON FUNCTION `d`.`fo` TO `u`@`%`",),
        ("GRANT `r` TO `u`@`%`",),
    ]
    sorted_grants = fingerprint.sorted_grants
    shuffled = lines[:]
    random.Random(30).shuffle(shuffled)
    assert shuffled != lines
    assert sorted_grants(shuffled) == sorted_grants(lines)
    # sorting keeps every line: a grant added or removed still changes the list
    assert sorted_grants(lines[1:]) != sorted_grants(lines)
    assert len(sorted_grants(lines)) == len(lines)


def _serve(my: MysqlScratch, *options: str) -> Any:
    """`sql query`'s service as the reader, the catalog read on every call."""
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["sql", "query", "--dsn", my.reader_url, *options, "--catalog-check-interval", "0", "SELECT 1"]
    )
    return sqlcli._service(args, 100)


def _ask(service: Any, sql: str) -> str:
    """The call's markdown, or its error code."""
    try:
        return str(service.query(sql, call_id="t", max_rows=10)[1])
    except ToolError as exc:
        return exc.code


def test_a_function_losing_its_order_by_within_the_second_it_passed_is_refused(
    my: MysqlScratch, tmp_path: Path
) -> None:
    """End to end, as the red team ran it: v1 re-verified by a call, v2 in the same second."""
    with my.admin.cursor() as c:
        c.execute(_function(my, _ordered(my)))
        c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.fo TO '{my.reader}'@'%'")
    fo = f"{my.db}.fo"
    service = _serve(
        my,
        "--mask",
        masks_file(tmp_path, "customers.email"),
        "--allow",
        f"routine:{fo}",
        "--allow-function",
        fo,
    )

    def ask() -> str:
        return _ask(service, f"SELECT {fo}() AS x")

    try:
        assert "1,2,3,4,5,6" in ask()
        answers: list[str] = []
        v1, v2 = _function(my, _ordered(my)), _function(my, _unordered(my))
        _same_second(my, v1, lambda: answers.append(ask()), v2)
        assert "1,2,3,4,5,6" in answers[0]  # v1 re-verified and served
        later = [ask() for _ in range(3)]
        assert later == ["SOURCE_UNVERIFIED"] * 3, later
        assert not any(IN_EMAIL_ORDER in a for a in later)
    finally:
        service.engine.close()


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE {db}.plain ADD KEY tk (tag, id)",
        "ALTER TABLE {db}.plain DROP PRIMARY KEY, ADD PRIMARY KEY (tag, id)",
        "ALTER TABLE {db}.plain ADD COLUMN t2 VARCHAR(80) AS (UPPER(tag)) VIRTUAL",
        "ALTER TABLE {db}.plain MODIFY tag VARCHAR(80) NOT NULL",
        "ALTER TABLE {db}.plain ALTER tag SET DEFAULT (LOWER(CONCAT(id, 'x')))",
    ],
    ids=["new-index", "new-primary-key", "new-generated-column", "column-changed", "default-changed"],
)
def test_a_table_altered_while_serving_moves_it(
    my: MysqlScratch, reader: pymysql.Connection[Any], change: str
) -> None:
    # The order check reads keys and the routine/view checks PREPARE whole relations: an ALTER
    # TABLE while serving is a change to verify again, not one to wait --reverify-interval for.
    with my.admin.cursor() as c:
        c.execute(f"CREATE TABLE {my.db}.plain (id INT PRIMARY KEY, tag VARCHAR(80))")
        c.execute(f"GRANT SELECT ON {my.db}.plain TO '{my.reader}'@'%'")
    first = mysql_fingerprint(reader)
    assert mysql_fingerprint(reader) == first
    with my.admin.cursor() as c:
        c.execute(change.format(db=my.db))
    assert mysql_fingerprint(reader) != first


def test_a_default_over_the_masked_column_set_while_serving_is_refused(
    my: MysqlScratch, tmp_path: Path
) -> None:
    """Red team rt31 F8: MariaDB evaluates `DEFAULT(col)` per row without the privileges of the
    columns its expression reads; `DEFAULT (LOWER(email))` set while serving answered the e-mails
    through a granted view over `DEFAULT(nick)` until --reverify-interval."""
    with my.admin.cursor() as c:
        c.execute(f"ALTER TABLE {my.db}.customers ADD COLUMN nick VARCHAR(100) DEFAULT 'x'")
        c.execute(f"GRANT SELECT (nick) ON {my.db}.customers TO '{my.reader}'@'%'")
        c.execute(
            f"CREATE SQL SECURITY INVOKER VIEW {my.db}.vd AS"
            f" SELECT id, DEFAULT(nick) AS d FROM {my.db}.customers"
        )
        c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.vd TO '{my.reader}'@'%'")
    vd = f"{my.db}.vd"
    masks = masks_file(tmp_path, "customers.email")
    service = _serve(my, "--mask", masks, "--allow", f"view:{vd}", "--allow", f"view-order:{vd}")

    def ask() -> str:
        return _ask(service, f"SELECT id, d FROM {vd} ORDER BY id")

    try:
        assert "| x |" in ask()
        with my.admin.cursor() as c:
            c.execute(f"ALTER TABLE {my.db}.customers MODIFY nick VARCHAR(100) DEFAULT (LOWER(email))")
        later = [ask() for _ in range(3)]
        assert later == ["SOURCE_UNVERIFIED"] * 3, later  # before: | 1 | zed@x.io | ...
    finally:
        service.engine.close()


def test_a_merge_table_pointed_at_the_masked_table_while_serving_is_refused(
    my: MysqlScratch, tmp_path: Path
) -> None:
    """Red team rt31 F9: a MERGE table's UNION list is in no information_schema table; one granted
    whole over a harmless twin, re-pointed at the masked table while serving, answered the e-mails."""
    with my.admin.cursor() as c:
        for t in ("cmy", "twin"):
            c.execute(f"CREATE TABLE {my.db}.{t} (id INT, email VARCHAR(80)) ENGINE=MyISAM")
        c.execute(f"INSERT INTO {my.db}.cmy VALUES (1, 'zed@x.io'), (2, 'amy@x.io')")
        c.execute(f"INSERT INTO {my.db}.twin VALUES (1, 'none'), (2, 'none')")
        c.execute(f"GRANT SELECT (id) ON {my.db}.cmy TO '{my.reader}'@'%'")
        c.execute(
            f"CREATE TABLE {my.db}.m (id INT, email VARCHAR(80)) ENGINE=MRG_MyISAM UNION=({my.db}.twin)"
        )
        c.execute(f"GRANT SELECT ON {my.db}.m TO '{my.reader}'@'%'")
    # a MERGE table has no key of its own: InnoDB's order does not apply, opted in
    service = _serve(
        my, "--mask", masks_file(tmp_path, "customers.email", "cmy.email"), "--allow", "clustered-order:cmy"
    )

    def ask() -> str:
        return _ask(service, f"SELECT id, email FROM {my.db}.m ORDER BY id")

    try:
        assert "none" in ask()
        with my.admin.cursor() as c:
            c.execute(f"ALTER TABLE {my.db}.m UNION=({my.db}.cmy)")
        later = [ask() for _ in range(3)]
        assert later == ["SOURCE_UNVERIFIED"] * 3, later  # before: | 1 | zed@x.io | ...
    finally:
        service.engine.close()
