"""Packages and extension functions count as per-row functions over masked reads (red team rt34).

MariaDB (F2): a PACKAGE function keeping a package-level counter (`cnt := cnt + 1`), called as
`db.pkg.tick(id)`, summed the ids weighted by `POW(10, tick - 1)`: one call gave the full e-mail
ranking, with no `function-order:`. PostgreSQL (F1): isn's `isn_weak(boolean)` is a C setter of
process-global state labelled IMMUTABLE; C and superuser extension functions were exempted, so it
made a one-bit comparison oracle on the masked order. Now every function outside the catalog counts
but those of `STATELESS_EXTENSIONS` (citext's `replace` must not make the built-in one per-row).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlglot

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import per_row_routines
from mcpkit.sql.masking.shapes import refuse_shapes
from mcpkit.sql.masking.taint import MaskRefused
from tests.helpers import UNBOUNDED_MEMORY
from tests.sql.sql_support import (
    MysqlScratch,
    PgScratch,
    masks_file,
    mysql_scratch,
    pg_scratch,
    row_order_routines,
)
from tests.sql.sql_support import run_cli as _run

SECRET = "@secret.example"
ROWS = [(1, "b"), (2, "d"), (3, "e"), (4, "a"), (5, "c"), (6, "f")]  # e-mail order of ids: 4 1 5 2 3 6
CODE = "632514"  # digits of sum(id * 10^(tick-1)), most significant first: the ids in reverse e-mail order
PER_ROW = "functions whose value changes from row to row in the order rows are read"


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt34p") as db, db.admin.cursor() as c:
        d, r = db.db, f"'{db.reader}'@'%'"
        rows = ", ".join(f"({i}, 'n{i}', '{e}{SECRET}')" for i, e in ROWS)
        c.execute("SET @rt34fix_mode = @@session.sql_mode")
        for sql in (
            f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80),"
            " UNIQUE KEY cov (email, id))",
            f"INSERT INTO {d}.customers VALUES {rows}",
            f"GRANT SELECT (id, name) ON {d}.customers TO {r}",
            "SET sql_mode = ORACLE",
            f"CREATE DEFINER = {r} PACKAGE {d}.pk SQL SECURITY INVOKER AS"
            " FUNCTION tick(x INT) RETURN INT; END",
            f"CREATE DEFINER = {r} PACKAGE BODY {d}.pk SQL SECURITY INVOKER AS cnt INT := 0;"
            " FUNCTION tick(x INT) RETURN INT AS BEGIN cnt := cnt + 1; RETURN cnt; END; END",
            f"GRANT EXECUTE ON PACKAGE {d}.pk TO {r}",
            f"GRANT EXECUTE ON PACKAGE BODY {d}.pk TO {r}",
            "SET sql_mode = @rt34fix_mode",
            f"CREATE SQL SECURITY INVOKER VIEW {d}.v_pk AS"
            f" SELECT id, {d}.pk.tick(id) AS k FROM {d}.customers",
            f"GRANT SELECT, SHOW VIEW ON {d}.v_pk TO {r}",
        ):
            c.execute(sql)
        yield db


def _my_args(my: MysqlScratch, tmp_path: Path, *more: str) -> list[str]:
    masks = masks_file(tmp_path, "customers.email")
    allow = [
        "--allow",
        f"routine:{my.db}.pk",
        "--allow",
        f"view:{my.db}.v_pk",
        "--allow-function",
        f"{my.db}.pk*",
        *more,
    ]
    return ["--dsn", my.reader_url, "--mask", masks, *allow]


@pytest.mark.mysql
def test_mariadb_a_package_function_over_a_masked_read_is_refused(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranks = f"SELECT sum(id * POW(10, {my.db}.pk.tick(id) - 1)) AS code FROM customers"
    view = ["--allow", f"view-order:{my.db}.v_pk"]
    code, out = _run(capsys, "sql", "query", *_my_args(my, tmp_path, *view), ranks)
    assert code == 2 and CODE not in out, out  # before: | 632514.0 |, the ids in e-mail order
    assert f"function {my.db}.pk may answer in the scan order of a masked table: it is a package" in out, out
    assert f"--allow function-order:{my.db}.pk" in out, out
    found = row_order_routines(my.reader_url)
    assert (my.db, "pk") in found and "it is a package" in found[(my.db, "pk")], found
    code, out = _run(capsys, "sql", "doctor", *_my_args(my, tmp_path, *view))
    assert (
        f"warn masks: function {my.db}.pk counts as a per-row function over masked reads: it is a package"
        in out
    )
    # the per-call check counts each spelling of a call through the package too
    engine = SqlEngine(my.reader_url)
    try:
        engine.profile.use_function_policy(FunctionPolicy.for_dialect("mysql", extra=[f"{my.db}.pk.tick"]))
        per_row = per_row_routines(engine)
    finally:
        engine.close()
    for call in (
        ranks,
        ranks.replace(f"{my.db}.pk.", "`PK`."),
        ranks.replace(".tick", ".`TICK`"),
        ranks.replace(".pk.", ".pķ."),
    ):
        with pytest.raises(MaskRefused, match="changes from row to row in the order rows are read"):
            refuse_shapes(sqlglot.parse_one(call, read="mysql"), "mysql", per_row)
    # the suggestion of a refused call is one the CLI takes (before: rejected, not "schema.name")
    bare = ["--dsn", my.reader_url, "--allow", f"routine:{my.db}.pk", "--allow", f"view:{my.db}.v_pk"]
    code, out = _run(capsys, "sql", "query", *bare, f"SELECT {my.db}.pk.tick(1) AS k")
    assert code == 3 and f"(--allow-function {my.db}.pk.tick)" in out, out
    bare += ["--allow-function", f"{my.db}.pk.tick"]
    code, out = _run(capsys, "sql", "query", *bare, f"SELECT {my.db}.pk.tick(1) AS k")
    assert code == 0 and "| k |" in out, out
    opt_in = ["--allow", f"function-order:{my.db}.pk"]
    # a sum of POW's doubles (or of a routine's value, its type unknown) is refused: an exact one
    exact = f"SELECT sum(id * CAST({my.db}.pk.tick(id) AS SIGNED)) AS code FROM customers"
    code, out = _run(capsys, "sql", "query", *_my_args(my, tmp_path, *view, *opt_in), exact)
    assert code == 0 and "| code" in out, out  # accepted: the order it hands on is the operator's choice


@pytest.mark.mysql
def test_mariadb_a_view_calling_a_package_function_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT sum(id * POW(10, k - 1)) AS code FROM v_pk"
    code, out = _run(capsys, "sql", "query", *_my_args(my, tmp_path), sql)
    assert code == 2 and CODE not in out, out
    assert f"view {my.db}.v_pk may answer in the scan order of a masked table: it calls pk" in out, out
    opt_in = ["--allow", f"function-order:{my.db}.pk"]
    code, out = _run(
        capsys, "sql", "query", *_my_args(my, tmp_path, *opt_in), "SELECT id FROM v_pk ORDER BY id"
    )
    assert code == 0 and "| 6 |" in out, out


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt34p") as db:
        rows = ", ".join(f"({i}, 'n{i}', '{e}{SECRET}')" for i, e in ROWS)
        available = db.admin.execute(
            "SELECT name FROM pg_available_extensions WHERE name IN ('isn', 'citext')"
        ).fetchall()
        if len(available) < 2:
            pytest.skip("the isn and citext extensions are not available")
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE EXTENSION isn;
            CREATE EXTENSION citext;
            CREATE TABLE customers (id int PRIMARY KEY, name citext NOT NULL, email text NOT NULL);
            INSERT INTO customers VALUES {rows};
            CREATE INDEX customers_email ON customers (email, id);
            CLUSTER customers USING customers_email;
            ANALYZE customers;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            """
        )
        yield db


def _pg_args(pg: PgScratch, tmp_path: Path, *more: str) -> list[str]:
    masks = masks_file(tmp_path, "customers.email")
    allow = [
        "--allow",
        "extension:isn",
        "--allow",
        "extension:citext",
        "--allow",
        "function:public.isn_weak(boolean)",
    ]
    return ["--dsn", pg.reader_url, "--mask", masks, *UNBOUNDED_MEMORY, *allow, *more]


@pytest.mark.postgres
def test_postgres_an_extension_c_setter_over_a_masked_read_is_refused(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = {n for _, n in row_order_routines(pg.admin_url)}
    assert "isn_weak" in found and "replace" not in found and "strpos" not in found, found
    sql = (
        "SELECT id, CASE WHEN id = 4 THEN public.isn_weak(id > 0) WHEN id = 1 THEN"
        " CAST('978000000000' || (id * 0 + 1) AS isbn13) IS NOT NULL END AS b FROM customers ORDER BY id"
    )
    code, out = _run(capsys, "sql", "query", *_pg_args(pg, tmp_path), sql)
    assert code == 3 and PER_ROW in out, out  # before: answered (4 scanned before 1: weak mode on)
    # the rest of isn (types, operators, casts) is reviewed: a read of them over the table answers
    sql = "SELECT id, CAST('9780000000002' AS isbn13) < CAST('9780000000019' AS isbn13) AS b FROM customers"
    code, out = _run(capsys, "sql", "query", *_pg_args(pg, tmp_path), sql + " ORDER BY id")
    assert code == 0 and "| 6 | true |" in out, out


@pytest.mark.postgres
def test_postgres_a_reviewed_extension_keeps_built_in_calls_of_its_names(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT id, replace(name, 'n', 'm') AS r, strpos(name, '1') AS p FROM customers ORDER BY id"
    code, out = _run(capsys, "sql", "query", *_pg_args(pg, tmp_path), sql)
    assert code == 0 and "| 1 | m1 | 2 |" in out, out


@pytest.mark.postgres
def test_postgres_catalog_schema_aggregates_and_added_members_count(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rt34 F3: a superuser's function in pg_catalog; F5: intagg's aggregate (extension not reviewed);
    # F7: a plpgsql function added to an extension (here a reviewed one)
    counter = (
        "LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN set_config('rt34p.c', (coalesce(nullif("
        "current_setting('rt34p.c', true), ''), '0')::int + 1)::text, false)::int; END $$"
    )
    pg.admin.execute(
        f"""
        CREATE FUNCTION pg_catalog.rt34p_tick(x int) RETURNS int {counter};
        CREATE FUNCTION public.rt34p_member(x int) RETURNS int {counter};
        ALTER EXTENSION citext ADD FUNCTION public.rt34p_member(int);
        """
    )
    intagg = pg.admin.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'intagg'").fetchone()
    if intagg:
        pg.admin.execute("CREATE EXTENSION intagg")
    found = {n for _, n in row_order_routines(pg.admin_url)}
    assert {"rt34p_tick", "rt34p_member"} <= found and (not intagg or "int_array_aggregate" in found), found
    more = ["--allow", "function:pg_catalog.rt34p_tick", "--allow-function", "rt34p_tick"]
    if intagg:
        more += ["--allow", "extension:intagg", "--allow", "function:public.int_array_aggregate"]
    args = _pg_args(pg, tmp_path, *more)
    sql = "SELECT sum(id * 10 ^ (rt34p_tick(id) - 1)) AS code FROM customers"
    code, out = _run(capsys, "sql", "query", *args, sql)
    assert code == 3 and PER_ROW in out and CODE not in out, out  # before: the ranking in one call
    if intagg:
        sql = "SELECT name IS NOT NULL AS g, public.int_array_aggregate(id) AS ids FROM customers GROUP BY 1"
        code, out = _run(capsys, "sql", "query", *args, sql)
        assert code == 3 and PER_ROW in out and "[4,1,5,2,3,6]" not in out, out
