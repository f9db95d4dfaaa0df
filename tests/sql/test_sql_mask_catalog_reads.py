"""A function the agent may call whose body reads the database's catalog (red team rt33b F3).

`members` is partitioned by the masked e-mail (below 'n', from 'n'); the reader holds id and name.
An INVOKER function over `information_schema.PARTITIONS` (MariaDB) or `pg_class.reltuples`
(PostgreSQL: every role reads it, whatever it may select) answered per-partition row counts, the
masked column's histogram ("4 below 'n', 2 from 'n'"), while start-up said ok. Now a function the
reader can execute whose body reads the catalog refuses start-up unless `--allow function-order:S.N`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from tests.helpers import ROOT, UNBOUNDED_MEMORY, text_of
from tests.sql.sql_support import MysqlScratch, PgScratch, masks_file, mysql_scratch, pg_scratch, run_cli

EMAILS = ("alice", "bob", "carl", "mike", "yann", "zed")


@pytest.fixture
def maria(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt33sys") as db:
        d, r = db.db, f"'{db.reader}'@'%'"
        inv = "DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER"
        values = ", ".join(f"({i}, '{n}', '{n}@x.example')" for i, n in enumerate(EMAILS, 1))
        with db.admin.cursor() as c:
            for sql in (
                f"CREATE TABLE {d}.members (id int, name varchar(20), email varchar(80),"
                " PRIMARY KEY (id, email)) PARTITION BY RANGE COLUMNS(email)"
                " (PARTITION p_am VALUES LESS THAN ('n'), PARTITION p_nz VALUES LESS THAN (MAXVALUE))",
                f"INSERT INTO {d}.members VALUES {values}",
                f"ANALYZE TABLE {d}.members",
                f"CREATE TABLE {d}.products (id int PRIMARY KEY, label varchar(20))",
                f"INSERT INTO {d}.products VALUES (1, 'lamp')",
                f"CREATE DEFINER={r} FUNCTION {d}.f_rows(t varchar(64), p varchar(64)) RETURNS bigint {inv}"
                " RETURN (SELECT table_rows FROM information_schema.PARTITIONS"
                f" WHERE table_schema = '{d}' AND table_name = t AND partition_name = p)",
                f"CREATE DEFINER={r} FUNCTION {d}.f_via(t varchar(64), p varchar(64)) RETURNS bigint {inv}"
                " RETURN f_rows(t, p) + 0",
                f"CREATE DEFINER={r} FUNCTION {d}.f_ok(x int) RETURNS varchar(20) {inv}"
                " RETURN (SELECT label FROM products WHERE id = x)",
                f"GRANT SELECT (id, name) ON {d}.members TO {r}",
                f"GRANT SELECT ON {d}.products TO {r}",
            ):
                c.execute(sql)
            for fn in ("f_rows", "f_via", "f_ok"):
                c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
        yield db


def _my_base(db: MysqlScratch, tmp_path: Path) -> list[str]:
    base = ["sql", "query", "--dsn", db.reader_url, "--mask", masks_file(tmp_path, "members.email")]
    base += ["--allow", "clustered-order:members"]  # no PRIMARY KEY: what is tested is the catalog read
    base += ["--allow", "partition-order:members"]  # partitioned by the e-mail: so too
    fns = ("f_rows", "f_via", "f_ok")
    base += [a for f in fns for a in ("--allow-function", f"{db.db}.{f}", "--allow", f"routine:{db.db}.{f}")]
    return base


@pytest.mark.mysql
def test_mariadb_function_reading_information_schema_partitions_refuses_start_up(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    query = f"SELECT {db.db}.f_rows('members', 'p_am') AS below_n, {db.db}.f_via('members', 'p_nz') AS from_n"
    code, out = run_cli(capsys, *_my_base(db, tmp_path), query)
    assert code == 2 and "| 4 " not in out, out  # before: | 4 | 2 |
    assert f"function {db.db}.f_rows it reads the database's catalog (information_schema.PARTITIONS)" in out
    assert f"function {db.db}.f_via it calls f_rows, which reads the database's catalog" in out, out
    assert f"--allow function-order:{db.db}.f_rows" in out, out
    assert f"{db.db}.f_ok" not in out, out
    opt_in = [a for f in ("f_rows", "f_via") for a in ("--allow", f"function-order:{db.db}.{f}")]
    code, out = run_cli(capsys, *_my_base(db, tmp_path), *opt_in, query)
    assert code == 0 and "below_n" in out, out


@pytest.mark.mysql
def test_mariadb_function_reading_only_user_tables_still_serves(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    with db.admin.cursor() as c:
        c.execute(f"DROP FUNCTION {db.db}.f_via")
        c.execute(f"DROP FUNCTION {db.db}.f_rows")
    code, out = run_cli(capsys, *_my_base(db, tmp_path), f"SELECT {db.db}.f_ok(1) AS label")
    assert code == 0 and "lamp" in out, out


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt33sys") as db:
        values = ", ".join(f"({i}, '{n}', '{n}@x.example')" for i, n in enumerate(EMAILS, 1))
        db.admin.execute(
            f"""
            CREATE TABLE members (id int, name text, email text) PARTITION BY RANGE (email);
            CREATE TABLE members_am PARTITION OF members FOR VALUES FROM (MINVALUE) TO ('n');
            CREATE TABLE members_nz PARTITION OF members FOR VALUES FROM ('n') TO (MAXVALUE);
            INSERT INTO members VALUES {values};
            ANALYZE members;
            CREATE TABLE products (id int PRIMARY KEY, label text);
            INSERT INTO products VALUES (1, 'lamp');
            GRANT SELECT (id, name) ON members TO {db.reader};
            GRANT SELECT ON products TO {db.reader};
            CREATE FUNCTION f_rows(p text) RETURNS real LANGUAGE sql STABLE SECURITY INVOKER
              AS 'SELECT reltuples FROM pg_class WHERE relname = p';
            CREATE FUNCTION f_ok(i int) RETURNS text LANGUAGE sql STABLE SECURITY INVOKER
              AS 'SELECT label FROM public.products WHERE id = i';
            """
        )
        yield db


@pytest.mark.postgres
def test_postgres_function_reading_pg_class_reltuples_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks_file(tmp_path, "members.email")]
    base += [
        "--allow",
        "partition-order:public.members",
    ]  # partitioned by the e-mail: the catalog read is tested
    for f in ("f_rows", "f_ok"):
        base += ["--allow-function", f, "--allow", f"function:public.{f}"]
    query = "SELECT f_rows('members_am') AS below_n"
    code, out = run_cli(capsys, *base, query)
    assert code == 2 and "| 4 " not in out, out  # before: | 4 |
    assert "function public.f_rows it reads the database's catalog (pg_class)" in out, out
    assert "public.f_ok" not in out, out
    code, out = run_cli(capsys, *base, "--allow", "function-order:public.f_rows", query)
    assert code == 0 and "below_n" in out, out
    pg.admin.execute("DROP FUNCTION f_rows")
    code, out = run_cli(capsys, *base, "SELECT label FROM products WHERE id = 1")  # f_ok: no finding
    assert code == 0 and "lamp" in out, out


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


@pytest.mark.mysql
@pytest.mark.anyio
async def test_mariadb_function_replaced_while_serving_to_read_the_catalog_is_refused(
    maria: MysqlScratch, tmp_path: Path
) -> None:
    db, r = maria, f"'{maria.reader}'@'%'"
    fn = f"CREATE DEFINER={r} FUNCTION {db.db}.f_rows(t varchar(64), p varchar(64)) RETURNS bigint"
    fn += " DETERMINISTIC READS SQL DATA SQL SECURITY INVOKER"
    with db.admin.cursor() as c:
        c.execute(f"DROP FUNCTION {db.db}.f_via")
        c.execute(f"DROP FUNCTION {db.db}.f_rows")
        c.execute(f"{fn} RETURN (SELECT COUNT(*) FROM products WHERE label = t)")
        c.execute(f"GRANT EXECUTE ON FUNCTION {db.db}.f_rows TO {r}")
    args = ["-m", "mcpkit", *_my_base(db, tmp_path)[:1], "serve", *_my_base(db, tmp_path)[2:]]
    args += ["--no-audit", *UNBOUNDED_MEMORY, "--catalog-check-interval", "0"]
    env = get_default_environment()  # and the source under test, where one is given (an older one)
    env.update({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)
    query = f"SELECT {db.db}.f_rows('members', 'p_am') AS below_n"
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("execute_query", {"query": query})
        assert _code(result) == "OK" and "| 0 |" in text_of(result), text_of(result)
        with db.admin.cursor() as c:
            c.execute(f"DROP FUNCTION {db.db}.f_rows")
            c.execute(
                f"{fn} RETURN (SELECT table_rows FROM information_schema.PARTITIONS"
                f" WHERE table_schema = '{db.db}' AND table_name = t AND partition_name = p)"
            )
            c.execute(f"GRANT EXECUTE ON FUNCTION {db.db}.f_rows TO {r}")
        result = await client.call_tool("execute_query", {"query": query})
        said = text_of(result)
        assert _code(result) == "SOURCE_UNVERIFIED" and "| 4 |" not in said, said  # before: | 4 |
        assert "f_rows" not in said and len(said.splitlines()) == 1, said
