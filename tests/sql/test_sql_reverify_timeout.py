"""A call whose deadline passes while the re-verification runs answers TIMEOUT, and the next works.

With `--mask`, a call after the catalog moved re-runs the start-up verification in its own session
before its SQL (`reverify.Guard.check`). An operator session holding a lock the verification waits
for made the call's deadline pass mid-verification: the cancelled session then let SQLAlchemy's
`PendingRollbackError` out as a plain exception instead of a stable code (red team rt33).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pymysql
import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import MysqlScratch, PgScratch, mysql_scratch, pg_scratch

_ROWS = ", ".join(f"({i}, 'n{i}', 'secret{i}@x.io')" for i in range(1, 7))


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt33t") as db:
        db.admin.execute(
            f"""
            CREATE TABLE cust (id int PRIMARY KEY, name text, email text);
            INSERT INTO cust VALUES {_ROWS};
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON cust TO {db.reader};
            """
        )
        yield db


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt33t") as db:
        with db.admin.cursor() as c:
            c.execute(f"CREATE TABLE {db.db}.cust (id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(80))")
            c.execute(f"INSERT INTO {db.db}.cust VALUES {_ROWS}")
            c.execute(f"GRANT SELECT (id, name) ON {db.db}.cust TO '{db.reader}'@'%'")
        yield db


def _service(tmp_path: Path, dsn: str) -> SqlService:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - cust.email\n")
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["sql", "query", "--dsn", dsn, "--mask", str(masks), "--timeout", "20",
         "--allow", "unbounded-memory", "SELECT 1"]
    )  # fmt: skip
    args.allow, args.allow_function = sqlcli.opt_ins(args)
    return sqlcli._service(args, 1000)


def _ask(service: SqlService, timeout_s: float | None = None) -> tuple[str, str]:
    """(code or "ok", the sentence or the answer); anything but a `ToolError` fails the test."""
    sql = "SELECT id, name FROM cust ORDER BY id"
    try:
        return "ok", service.query(sql, call_id="rt33t", max_rows=10, timeout_s=timeout_s)[1]
    except ToolError as exc:
        return str(exc.code), str(exc)


def test_postgres_a_timeout_during_reverification_answers_a_code_and_the_next_call_works(
    pg: PgScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, pg.reader_url)
    assert _ask(service)[0] == "ok"
    pg.admin.execute("CREATE VIEW moved AS SELECT 1 AS one")  # the fingerprint moves: verify again
    with psycopg.connect(pg.admin_url) as holder:
        holder.execute("LOCK TABLE cust IN ACCESS EXCLUSIVE MODE")  # held until the block ends
        code, sentence = _ask(service, 2.0)  # its deadline passes while it verifies again
        holder.rollback()
    assert code in {"TIMEOUT", "SOURCE_UNVERIFIED"}, (code, sentence)
    assert "cust" not in sentence and "Error" not in sentence
    code, answer = _ask(service)
    assert code == "ok" and "n1" in answer, (code, answer)


def test_mariadb_a_timeout_during_reverification_answers_a_code_and_the_next_call_works(
    my: MysqlScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, my.reader_url)
    assert _ask(service)[0] == "ok"
    with my.admin.cursor() as c:  # the fingerprint moves: verify again
        c.execute(f"CREATE SQL SECURITY INVOKER VIEW {my.db}.moved AS SELECT 1 AS one")
        c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.moved TO '{my.reader}'@'%'")
    holder = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", autocommit=False)
    try:
        with holder.cursor() as c:
            c.execute(f"LOCK TABLES {my.db}.cust WRITE")
        code, sentence = _ask(service, 2.0)  # its deadline passes while it verifies again
        with holder.cursor() as c:
            c.execute("UNLOCK TABLES")
    finally:
        holder.close()
    assert code in {"TIMEOUT", "SOURCE_UNVERIFIED"}, (code, sentence)
    assert "cust" not in sentence and "Error" not in sentence
    code, answer = _ask(service)
    assert code == "ok" and "n1" in answer, (code, answer)
