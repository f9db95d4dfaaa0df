"""A routine body reading a relation the account cannot see (red team rt29 F3).

An INVOKER view over the masked `customers.email`, not granted to the reader; the reader's own
INVOKER function reading only that view; root's DEFINER view calling the function, opted in with
`--allow view:` / `--allow routine:`. The body named nothing masked the account could see, PREPARE
of the view as the account does not open function bodies, and inside the view the function runs
with the view definer's rights: every e-mail was served in clear while start-up and doctor said
ok. Now a relation a routine body names that the account cannot see, or cannot read every column
of, counts as reading a masked column (not liftable by an opt-in). PostgreSQL runs a function a view
calls as the caller (unless SECURITY DEFINER): the same set-up is stopped by the database there.
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

SECRET = "@secret.example"
TAINTED = ("v_f3", "v_nested", "v_other", "v_cols", "v_proc", "v_inv", "v_hidden")
CLEAN = ("v_ok", "v_ok2")
FUNCTIONS = ("f_hv", "f_outer", "f_cols", "f_proc", "f_inv", "f_hidden", "f_ok", "f_ok2")


@pytest.fixture
def maria(mysql_url: str) -> Iterator[MysqlScratch]:
    """customers.email withheld by column grants; reader-owned INVOKER functions over relations the
    reader cannot (fully) see, called by root's DEFINER views; a clean function over a granted table."""
    with mysql_scratch(mysql_url, "rt29a") as db:
        d, o, r = db.db, f"{db.db}_o", f"'{db.reader}'@'%'"
        inv = "READS SQL DATA SQL SECURITY INVOKER"
        with db.admin.cursor() as c:
            for sql in (
                f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80),"
                " e2 varchar(80) AS (LOWER(email)) VIRTUAL)",
                f"INSERT INTO {d}.customers (id, name, email) VALUES (1, 'Ann', 'ann{SECRET}'),"
                f" (2, 'Bob', 'bob{SECRET}')",
                f"CREATE TABLE {d}.orders (id int PRIMARY KEY, ce varchar(80))",
                f"INSERT INTO {d}.orders VALUES (1, 'ann{SECRET}'), (2, 'bob{SECRET}')",
                f"CREATE TABLE {d}.products (id int PRIMARY KEY, label varchar(20))",
                f"INSERT INTO {d}.products VALUES (1, 'lamp'), (2, 'desk')",
                f"CREATE SQL SECURITY INVOKER VIEW {d}.hv AS SELECT id, email FROM {d}.customers",
                # granted to the reader, but reads a generated column it was never granted
                f"CREATE SQL SECURITY INVOKER VIEW {d}.iv AS SELECT id, e2 FROM {d}.customers",
                f"CREATE DATABASE {o}",
                f"CREATE SQL SECURITY INVOKER VIEW {o}.hv2 AS SELECT id, email FROM {d}.customers",
                # the rt29 F3 function: its body names only the unseen INVOKER view
                f"CREATE DEFINER={r} FUNCTION {d}.f_hv(x int) RETURNS varchar(100) DETERMINISTIC {inv}"
                " RETURN (SELECT email FROM hv WHERE id = x)",
                f"CREATE DEFINER={r} FUNCTION {d}.f_outer(x int) RETURNS varchar(100) {inv}"
                f" RETURN CONCAT('', {d}.f_hv(x))",
                # another database: `hv2` is `{o}`.`hv2` there
                f"CREATE DEFINER={r} FUNCTION {o}.f_o(x int) RETURNS varchar(100) {inv}"
                " RETURN (SELECT h.email FROM hv2 h WHERE h.id = x)",
                f"CREATE DEFINER={r} FUNCTION {d}.f_cols(x int) RETURNS varchar(100) {inv}"
                " RETURN (SELECT ce FROM orders WHERE id = x)",
                f"CREATE DEFINER={r} PROCEDURE {d}.p_read(IN x int, OUT s varchar(100)) {inv}"
                " BEGIN SELECT h.email INTO s FROM products p, hv h WHERE h.id = x LIMIT 1; END",
                f"CREATE DEFINER={r} FUNCTION {d}.f_proc(x int) RETURNS varchar(100) {inv}"
                " BEGIN DECLARE s varchar(100); CALL p_read(x, s); RETURN s; END",
                f"CREATE DEFINER={r} FUNCTION {d}.f_inv(x int) RETURNS varchar(100) {inv}"
                " RETURN (SELECT e2 FROM iv WHERE id = x)",
                f"CREATE DEFINER={r} FUNCTION {d}.f_ok(x int) RETURNS varchar(100) DETERMINISTIC {inv}"
                " RETURN (SELECT label FROM products WHERE id = x)",
                # root's function, not granted to the reader (so unseen), called by the reader's own
                f"CREATE FUNCTION {d}.g_hidden(x int) RETURNS varchar(100) {inv}"
                f" RETURN (SELECT email FROM {d}.customers WHERE id = x)",
                f"CREATE DEFINER={r} FUNCTION {d}.f_hidden(x int) RETURNS varchar(100) {inv}"
                f" RETURN LOWER({d}.g_hidden(x))",
                # a compound body over a granted table, calling built-in functions only (a control)
                f"CREATE DEFINER={r} FUNCTION {d}.f_ok2(x int) RETURNS varchar(100) DETERMINISTIC {inv}"
                " BEGIN DECLARE s varchar(100); /* from hv */"
                " SELECT CONCAT(UPPER(p.label), '-', IFNULL(x, 0)) INTO s FROM products p WHERE p.id = x;"
                " RETURN s; END",
                f"CREATE VIEW {d}.v_hidden AS SELECT id, {d}.f_hidden(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_ok2 AS SELECT id, {d}.f_ok2(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_f3 AS SELECT id, {d}.f_hv(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_nested AS SELECT id, {d}.f_outer(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_other AS SELECT id, {o}.f_o(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_cols AS SELECT id, {d}.f_cols(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_proc AS SELECT id, {d}.f_proc(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_inv AS SELECT id, {d}.f_inv(id) AS e FROM {d}.customers",
                f"CREATE VIEW {d}.v_ok AS SELECT id, {d}.f_ok(id) AS e FROM {d}.customers",
                f"GRANT SELECT (id, name) ON {d}.customers TO {r}",
                f"GRANT SELECT (id) ON {d}.orders TO {r}",
                f"GRANT SELECT ON {d}.products TO {r}",
                f"GRANT SELECT, SHOW VIEW ON {d}.iv TO {r}",
                f"GRANT EXECUTE ON FUNCTION {o}.f_o TO {r}",
                f"GRANT EXECUTE ON PROCEDURE {d}.p_read TO {r}",
            ):
                c.execute(sql)
            for view in (*TAINTED, *CLEAN):
                c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.{view} TO {r}")
            for fn in FUNCTIONS:
                c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
        try:
            yield db
        finally:
            with db.admin.cursor() as c:
                c.execute(f"DROP DATABASE IF EXISTS {o}")


def _allow(db: MysqlScratch, views: tuple[str, ...]) -> list[str]:
    out = ["--allow", f"routine:{db.db}_o.f_o", "--allow", f"routine:{db.db}.p_read"]
    out += [a for fn in FUNCTIONS for a in ("--allow", f"routine:{db.db}.{fn}")]
    for view in views:
        out += ["--allow", f"view:{db.db}.{view}", "--allow", f"view-order:{db.db}.{view}"]
    return out


@pytest.mark.mysql
def test_mariadb_definer_view_over_a_routine_reading_an_unseen_relation_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    base = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email")]
    base += _allow(db, TAINTED + CLEAN)
    for view in TAINTED:
        code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM {view} ORDER BY id")
        assert code == 2 and SECRET not in out, (view, out)  # before: | 1 | ann@secret.example |
    for view in TAINTED:
        assert f"view `{db.db}`.`{view}`: it calls function" in out, (view, out)
    assert all(f"`.`{clean}`:" not in out for clean in CLEAN), out
    assert f"it calls function f_hv, which names {db.db}.hv, which this account cannot see" in out, out
    assert f"which names {db.db}_o.hv2, which this account cannot see" in out, out
    assert f"names {db.db}.orders, which this account cannot read every column of" in out, out
    assert f"names {db.db}.iv, which this account cannot read every column of" in out, out
    assert "it calls function f_proc, which calls p_read, which reads a masked column" in out, out
    assert f"it calls function f_hidden, which calls {db.db}.g_hidden, which this account cannot see" in out
    assert f"GRANT SELECT on the columns it reads TO '{db.reader}'@'%' lets the check see them" in out, out
    assert "it calls function f_outer, which calls f_hv, which reads a masked column" in out, out
    code, out = run_cli(capsys, "sql", "doctor", *base)
    assert code != 0 and f"fail masks: view `{db.db}`.`v_f3`: it calls function f_hv" in out, out


@pytest.mark.mysql
def test_mariadb_routine_reading_granted_columns_still_serves(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    with db.admin.cursor() as c:
        for view in TAINTED:
            c.execute(f"DROP VIEW {db.db}.{view}")
    base = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email"), *_allow(db, CLEAN)]
    base += ["--allow-function", "f_ok", "--allow-function", "f_hv"]
    code, out = run_cli(capsys, "sql", "query", *base, "SELECT id, e FROM v_ok ORDER BY id")
    assert code == 0 and "lamp" in out and "desk" in out, out
    code, out = run_cli(capsys, "sql", "query", *base, "SELECT id, e FROM v_ok2 ORDER BY id")
    assert code == 0 and "DESK-2" in out, out
    code, out = run_cli(capsys, "sql", "query", *base, "SELECT f_ok(2) AS label")
    assert code == 0 and "desk" in out, out
    # called directly, the INVOKER function runs with the reader's rights: the database refuses it
    code, out = run_cli(capsys, "sql", "query", *base, "SELECT f_hv(1) AS e")
    assert code != 0 and SECRET not in out, out


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


@pytest.mark.mysql
@pytest.mark.anyio
async def test_mariadb_view_created_while_serving_is_refused_with_one_safe_sentence(
    maria: MysqlScratch, tmp_path: Path
) -> None:
    # rt29 F3 as reported: the server (stdio, --mask, the opt-ins) serving as the reader; the
    # function the view calls is replaced while it serves, and the next call verifies again.
    db, r = maria, f"'{maria.reader}'@'%'"
    fn = f"CREATE DEFINER={r} FUNCTION {db.db}.f_hv(x int) RETURNS varchar(100) DETERMINISTIC"
    fn += " READS SQL DATA SQL SECURITY INVOKER"
    with db.admin.cursor() as c:
        for view in TAINTED[1:]:
            c.execute(f"DROP VIEW {db.db}.{view}")
        c.execute(f"DROP FUNCTION {db.db}.f_hv")
        c.execute(f"{fn} RETURN (SELECT label FROM products WHERE id = x)")
        c.execute(f"GRANT EXECUTE ON FUNCTION {db.db}.f_hv TO {r}")
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", db.reader_url, "--no-audit", *UNBOUNDED_MEMORY]
    args += ["--mask", masks_file(tmp_path, "customers.email"), "--catalog-check-interval", "0"]
    args += _allow(db, TAINTED + CLEAN)
    env = get_default_environment()  # and the source under test, where one is given (an older one)
    env.update({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("execute_query", {"query": "SELECT id, e FROM v_f3 ORDER BY id"})
        assert _code(result) == "OK" and "lamp" in text_of(result), text_of(result)
        with db.admin.cursor() as c:
            c.execute(f"DROP FUNCTION {db.db}.f_hv")
            c.execute(f"{fn} RETURN (SELECT email FROM hv WHERE id = x)")
            c.execute(f"GRANT EXECUTE ON FUNCTION {db.db}.f_hv TO {r}")
        result = await client.call_tool("execute_query", {"query": "SELECT id, e FROM v_f3 ORDER BY id"})
        said = text_of(result)
        assert _code(result) == "SOURCE_UNVERIFIED" and SECRET not in said, said  # before: the e-mails
        assert "f_hv" not in said and len(said.splitlines()) == 1, said


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    """An owner's view calling SQL and plpgsql functions that read a view the reader cannot see."""
    with pg_scratch(pg_url, "rt29a") as db:
        owner = f"{db.db}_own"
        db.admin.execute(
            f"""
            CREATE ROLE {owner};
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            INSERT INTO customers VALUES (1, 'Ann', 'ann{SECRET}'), (2, 'Bob', 'bob{SECRET}');
            CREATE VIEW hv WITH (security_invoker = true) AS SELECT id, email FROM customers;
            GRANT SELECT ON customers, hv TO {owner};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            CREATE FUNCTION f_sql(i int) RETURNS text LANGUAGE sql STABLE SECURITY INVOKER
              AS 'SELECT email FROM public.hv WHERE id = i';
            CREATE FUNCTION f_plp(i int) RETURNS text LANGUAGE plpgsql STABLE SECURITY INVOKER
              AS 'BEGIN RETURN (SELECT email FROM public.hv WHERE id = i); END';
            CREATE VIEW v_calls AS SELECT id, f_sql(id) AS a, f_plp(id) AS b FROM customers;
            ALTER VIEW v_calls OWNER TO {owner};
            GRANT SELECT ON v_calls TO {db.reader};
            """
        )
        try:
            yield db
        finally:
            db.admin.execute(f"DROP OWNED BY {owner}; DROP ROLE {owner}")


@pytest.mark.postgres
def test_postgres_owner_view_over_a_function_reading_an_unseen_view_runs_it_as_the_caller(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    allow = [
        f"--allow={kind}:public.{name}"
        for kind, names in (
            ("view", ("v_calls",)),
            ("view-order", ("v_calls",)),
            ("function", ("f_sql", "f_plp")),
            ("function-order", ("f_sql", "f_plp")),
        )
        for name in names
    ]
    base = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks_file(tmp_path, "customers.email"), *allow]
    for sql in ("SELECT id, a FROM v_calls", "SELECT id, b FROM v_calls"):
        code, out = run_cli(capsys, *base, sql)
        assert SECRET not in out, (sql, out)
        # refused by the database at run time; over a masked read a run-time failure reads as the data
        # failure (red team rtA F1: its class told rows apart)
        assert code == 4 and ("may not read something" in out or "failed on the data" in out), (sql, out)


# Red team rt33b F2: a name inside a non-RECURSIVE CTE's own definition, or in an earlier CTE of the
# same WITH, is the relation, not the CTE; the scanner dropped every name some CTE bore, so
# `WITH hv AS (SELECT id, email FROM hv) ...` read the unseen view `hv` unchecked.
CTE_BODIES = {
    "f_cte": "RETURN (WITH hv AS (SELECT id, email FROM hv) SELECT email FROM hv WHERE id = x)",
    "f_cte2": "RETURN (WITH a AS (SELECT id, email FROM hv), hv AS (SELECT 1 AS id)"
    " SELECT email FROM a WHERE id = x)",
}


def test_body_relations_counts_a_name_a_cte_bears() -> None:
    from mcpkit.sql.profiles.mysql.routine_relations import body_relations

    compound = "BEGIN RETURN (WITH hv AS (SELECT id, email FROM hv) SELECT email FROM hv WHERE id = x); END"
    for body in (*CTE_BODIES.values(), compound):
        assert ("d", "hv") in body_relations(body, "d"), body  # before: [] (but the compound body)
    # the cost: a CTE's own name is probed as a relation of the routine's database (fail closed)
    assert body_relations("RETURN (WITH c AS (SELECT 1 AS a) SELECT a FROM c)", "d") == [("d", "c")]


@pytest.mark.mysql
def test_mariadb_routine_reading_a_relation_named_like_its_cte_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, d, r = maria, maria.db, f"'{maria.reader}'@'%'"
    with db.admin.cursor() as c:
        c.execute(f"USE {d}")  # MariaDB reads `hv` in the CTE's own definition as the view
        c.execute("WITH hv AS (SELECT id, email FROM hv) SELECT email FROM hv WHERE id = 1")
        assert c.fetchall() == ((f"ann{SECRET}",),)
        for view in TAINTED:  # the rest of start-up passes: the view answers or is refused on its own
            c.execute(f"DROP VIEW {d}.{view}")
        for fn, body in CTE_BODIES.items():
            c.execute(
                f"CREATE DEFINER={r} FUNCTION {d}.{fn}(x int) RETURNS varchar(100)"
                f" READS SQL DATA SQL SECURITY INVOKER {body}"
            )
            c.execute(f"CREATE VIEW {d}.v_{fn} AS SELECT id, {d}.{fn}(id) AS e FROM {d}.customers")
            c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_{fn} TO {r}")
    base = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email")]
    base += _allow(db, CLEAN)
    for fn in CTE_BODIES:
        base += [
            "--allow",
            f"routine:{d}.{fn}",
            "--allow",
            f"view:{d}.v_{fn}",
            "--allow",
            f"view-order:{d}.v_{fn}",
        ]
    for fn in CTE_BODIES:
        code, out = run_cli(capsys, "sql", "query", *base, f"SELECT id, e FROM v_{fn} ORDER BY id")
        assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example |
        assert f"view `{d}`.`v_{fn}`: it calls function {fn}, which names {d}.hv, which this account" in out


@pytest.mark.mysql
def test_mariadb_routine_whose_cte_is_named_like_a_granted_table_still_serves(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, d, r = maria, maria.db, f"'{maria.reader}'@'%'"
    bodies = {  # a CTE named like a readable relation is probed as that relation and passes
        "f_cte_ok": "RETURN (WITH products AS (SELECT id, label FROM products) SELECT label FROM products"
        " WHERE id = x)",
        # the cost: a CTE named like no relation counts as one the account cannot see
        "f_cte_cost": "RETURN (WITH c AS (SELECT id, label FROM products) SELECT label FROM c WHERE id = x)",
    }
    with db.admin.cursor() as c:
        c.execute(f"USE {d}")  # MariaDB wants a current database for a WITH in a routine body
        for view in TAINTED:
            c.execute(f"DROP VIEW {d}.{view}")
        for fn, body in bodies.items():
            c.execute(
                f"CREATE DEFINER={r} FUNCTION {d}.{fn}(x int) RETURNS varchar(100)"
                f" READS SQL DATA SQL SECURITY INVOKER {body}"
            )
            c.execute(f"CREATE VIEW {d}.v_{fn} AS SELECT id, {d}.{fn}(id) AS e FROM {d}.customers")
            c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_{fn} TO {r}")
    base = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email"), *_allow(db, CLEAN)]
    for fn in bodies:
        base += [
            "--allow",
            f"routine:{d}.{fn}",
            "--allow",
            f"view:{d}.v_{fn}",
            "--allow",
            f"view-order:{d}.v_{fn}",
        ]
    code, out = run_cli(capsys, "sql", "query", *base, "SELECT id, e FROM v_f_cte_ok ORDER BY id")
    assert "f_cte_ok" not in out and f"names {d}.c, which this account cannot see" in out, out
    with db.admin.cursor() as c:
        c.execute(f"DROP VIEW {d}.v_f_cte_cost")
    code, out = run_cli(capsys, "sql", "query", *base, "SELECT id, e FROM v_f_cte_ok ORDER BY id")
    assert code == 0 and "lamp" in out and "desk" in out, out
