"""A stored view or SQL function over a masked table must not hand on the masked scan order
(red team rt19mask F8).

The analysis of a call pins every order the call writes, but a call that names only a view runs the
view's stored query as written: `SELECT id FROM customers LIMIT 3`, `row_number() OVER ()`, an
unordered `string_agg` answer in the order the scan picks, which here is the e-mail order (rows
written in e-mail order, an index on the e-mail). Start-up now analyses every view and executable
LANGUAGE sql function over a masked table the reader can use and refuses those (exit 2, one line
each) unless `--allow view-order:S.N` / `function-order:S.N`; `grant --mask` leaves them out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.cli import main
from tests.helpers import text_of
from tests.sql.sql_support import MysqlScratch, PgScratch, mysql_scratch, pg_scratch, serving_masked

SECRET = "@secret.example"
# Ids out of e-mail order, rows written in e-mail order: a scan-ordered answer lists 4, 1, 5, 2, 3.
ROWS = [(4, "Dan", "a"), (1, "Ann", "b"), (5, "Eve", "c"), (2, "Bob", "d"), (3, "Cy", "e")]

# view -> its query: each follows the scan order (or orders on the masked column).
PG_BAD = {
    "v_limit": "SELECT id FROM customers LIMIT 3",
    "v_fetch": "SELECT id FROM customers OFFSET 1 FETCH FIRST 2 ROWS ONLY",
    "v_rownum": "SELECT id, row_number() OVER () AS rn FROM customers",
    "v_lag": "SELECT id, lag(id) OVER () AS prev FROM customers",
    "v_distinct_on": "SELECT DISTINCT ON (length(name) > 0) id, name FROM customers",
    "v_string_agg": "SELECT string_agg(id::text, ',') AS ids FROM customers",
    "v_array_agg": "SELECT array_agg(name) AS names FROM customers",
    "v_json_agg": "SELECT json_agg(id) AS ids FROM customers",
    "v_rank_email": "SELECT id, rank() OVER (ORDER BY email) AS r FROM customers",
    "v_order_email": "SELECT id FROM customers ORDER BY email LIMIT 3",
    "v_over_view": "SELECT id FROM v_limit",  # reads a view that follows the scan order
    "v_calls": "SELECT * FROM f_hidden()",  # calls a function that does (not on the allowlist)
    "v_ctid": "SELECT id, ctid::text AS pos FROM customers",  # physical position (red team rt23 F6)
    # red team rt21 F1: an ARRAY(subquery) lists the rows in scan order; F6: a user's aggregate
    "v_array_sub": "SELECT array_to_string(ARRAY(SELECT id FROM customers), ',') AS a",
    "v_user_agg": "SELECT cat(id::text || ',') AS a FROM customers",
}
PG_BAD_FUNCTIONS = {
    "f_limit": "SELECT id FROM customers LIMIT 3",
    "f_agg": "SELECT string_agg(name, ',') FROM customers",
    "f_atomic": "SELECT id FROM customers LIMIT 3",  # a SQL-standard body (BEGIN ATOMIC)
    "f_array": "SELECT array_to_string(ARRAY(SELECT id FROM customers), ',')",
}
# No construct that follows the scan order, or ordered by the primary key: served.
PG_GOOD = {
    "v_plain": "SELECT id, name FROM customers WHERE name <> 'x'",
    "v_pk_limit": "SELECT id, name FROM customers ORDER BY id LIMIT 3",
    "v_pk_rownum": "SELECT id, row_number() OVER (ORDER BY id) AS rn FROM customers",
    "v_pk_agg": "SELECT string_agg(name, ',' ORDER BY id) AS names FROM customers",
    "v_count": "SELECT count(*) AS n, max(id) AS top FROM customers",
    "v_bracket": "SELECT ARRAY[id, 0] AS a FROM customers",  # one row's values
    "v_array_pk": "SELECT ARRAY(SELECT id FROM customers ORDER BY id) AS a",
}
PG_GOOD_FUNCTIONS = {"f_ok": "SELECT id FROM customers ORDER BY id LIMIT 3"}
HIDDEN = (
    "CREATE FUNCTION f_hidden() RETURNS SETOF int STABLE LANGUAGE sql"
    " BEGIN ATOMIC SELECT id FROM customers LIMIT 3; END"
)


def _masks(tmp_path: Path) -> Path:
    path = tmp_path / "masks.yaml"
    path.write_text("masks:\n  - customers.email\n", encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "vieworder") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            CREATE INDEX ON customers (email);
            INSERT INTO customers VALUES {rows};
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            """
        )
        db.admin.execute(HIDDEN)
        db.admin.execute("CREATE AGGREGATE cat(text) (sfunc = textcat, stype = text, initcond = '')")
        for name, sql in {**PG_BAD, **PG_GOOD}.items():
            # security_invoker: an owner-rights view over a table with column grants is refused by
            # the least-privilege check already (`--allow view:S.N` opens it, and this check then).
            db.admin.execute(f"CREATE VIEW {name} WITH (security_invoker = true) AS {sql}")
            db.admin.execute(f"GRANT SELECT ON {name} TO {db.reader}")
        for name, sql in {**PG_BAD_FUNCTIONS, **PG_GOOD_FUNCTIONS}.items():
            returns = "text" if "string_agg" in sql or "ARRAY(" in sql else "SETOF int"
            body = f"BEGIN ATOMIC {sql}; END" if name == "f_atomic" else f"AS $${sql}$$"
            db.admin.execute(f"CREATE FUNCTION {name}() RETURNS {returns} STABLE LANGUAGE sql {body}")
        yield db


def _allow_functions() -> list[str]:
    return [a for f in [*PG_BAD_FUNCTIONS, *PG_GOOD_FUNCTIONS] for a in ("--allow-function", f"public.{f}")]


@pytest.mark.postgres
def test_postgres_views_and_functions_that_follow_the_scan_order_refuse_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the red team read: the ids in e-mail order, through a query naming only the view.
    plain = pg.admin.execute("SELECT id FROM v_limit").fetchall()
    assert [r[0] for r in plain] == [4, 1, 5]
    masks = _masks(tmp_path)
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", str(masks), *_allow_functions(),
        "SELECT * FROM v_limit",
    )  # fmt: skip
    assert code == 2, out
    assert SECRET not in out and "| 4 |" not in out
    for view in PG_BAD:
        assert f"view public.{view} may answer in the scan order of a masked table" in out, (view, out)
        assert f"--allow view-order:public.{view}" in out
    for function in PG_BAD_FUNCTIONS:
        assert f"function public.{function} may answer in the scan order" in out, (function, out)
        assert f"--allow function-order:public.{function}" in out
    for good in [*PG_GOOD, *PG_GOOD_FUNCTIONS]:
        assert f"public.{good} " not in out, (good, out)  # no false refusal


@pytest.mark.postgres
def test_postgres_a_function_the_reader_cannot_call_is_not_checked(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Off the allowlist is not enough (red team rt23 F2/F3: `o.f`, an operator or a cast calls it):
    # only a function the reader may not execute is left out.
    pg.admin.execute("REVOKE EXECUTE ON FUNCTION f_limit(), f_agg(), f_array(), f_ok() FROM PUBLIC")
    allow = [a for v in PG_BAD for a in ("--allow", f"view-order:public.{v}")]
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", str(_masks(tmp_path)), *allow,
        "SELECT count(*) AS n FROM customers",
    )  # fmt: skip
    assert code == 2, out
    assert "function public.f_atomic may answer in the scan order" in out, out
    assert "function public.f_hidden may answer in the scan order" in out, out
    pg.admin.execute("REVOKE EXECUTE ON FUNCTION f_atomic(), f_hidden() FROM PUBLIC")
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", str(_masks(tmp_path)), *allow,
        "SELECT count(*) AS n FROM customers",
    )  # fmt: skip
    assert code == 0, out
    assert "| 5 |" in out


@pytest.mark.postgres
def test_postgres_the_opt_ins_start_with_a_warning(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    allow = [a for v in PG_BAD for a in ("--allow", f"view-order:public.{v}")]
    allow += [a for f in [*PG_BAD_FUNCTIONS, "f_hidden"] for a in ("--allow", f"function-order:public.{f}")]
    with caplog.at_level(logging.WARNING, logger="mcpkit.sql"):
        code, out = _run(
            capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", str(_masks(tmp_path)),
            *_allow_functions(), *allow, "SELECT id, name FROM v_pk_limit",
        )  # fmt: skip
    assert code == 0, out
    assert "| 3 | Cy |" in out
    warned = caplog.text
    assert "--allow view-order:public.v_limit: view public.v_limit may answer" in warned, warned
    assert "--allow function-order:public.f_agg" in warned


@pytest.mark.postgres
def test_postgres_doctor_reports_them(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(
        capsys, "sql", "doctor", "--dsn", pg.reader_url, "--mask", str(_masks(tmp_path)), *_allow_functions(),
        "--allow", "view-order:public.v_limit",
    )  # fmt: skip
    assert code != 0, out
    assert "fail masks: view public.v_rownum may answer in the scan order" in out, out
    assert "warn masks: view public.v_limit may answer" in out, out
    assert "v_pk_limit" not in out and "v_plain" not in out


@pytest.mark.postgres
def test_postgres_grant_leaves_them_out(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reader = f"{pg.reader}_g"
    tables = ",".join(f"public.{t}" for t in ["customers", *PG_BAD, *PG_GOOD])
    code, out = _run(
        capsys, "sql", "grant", "--dsn", pg.admin_url, "--role", reader, "--tables", tables,
        "--mask", str(_masks(tmp_path)),
    )  # fmt: skip
    assert code == 0, out
    for view in PG_BAD:
        assert f"ON public.{view} TO" not in out, (view, out)
        assert f"-- left out: view public.{view} may answer in the scan order of a masked table" in out, (
            view,
            out,
        )
    for view in PG_GOOD:
        assert f"GRANT SELECT ON public.{view} TO" in out, (view, out)
    assert f'GRANT SELECT ("id", "name") ON public.customers TO "{reader}"' in out


# MariaDB: views only (a stored function's body is not inlined into a query the analysis reads).
MY_BAD = {
    "v_limit": "SELECT id FROM customers LIMIT 3",
    "v_offset": "SELECT id FROM customers LIMIT 2 OFFSET 1",
    "v_rownum": "SELECT id, row_number() OVER () AS rn FROM customers",
    "v_group_concat": "SELECT group_concat(id) AS ids FROM customers",
    "v_json_arrayagg": "SELECT json_arrayagg(name) AS names FROM customers",
    "v_over_view": "SELECT id FROM v_limit",
}
# (An INVOKER view ordered by the e-mail is not the reader's to use: MariaDB refuses it the column.)
MY_GOOD = {
    "v_plain": "SELECT id, name FROM customers WHERE name <> 'x'",
    "v_pk_limit": "SELECT id, name FROM customers ORDER BY id LIMIT 3",
    "v_pk_rownum": "SELECT id, row_number() OVER (ORDER BY id) AS rn FROM customers",
    "v_pk_concat": "SELECT group_concat(name ORDER BY id) AS names FROM customers",
}


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "vieworder") as db, db.admin.cursor() as c:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        c.execute(f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, name text, email varchar(80))")
        c.execute(f"CREATE INDEX by_email ON {db.db}.customers (email)")
        c.execute(f"INSERT INTO {db.db}.customers VALUES {rows}")
        c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
        for name, sql in {**MY_BAD, **MY_GOOD}.items():
            # INVOKER: a root DEFINER view is refused by the least-privilege check already
            c.execute(
                f"CREATE SQL SECURITY INVOKER VIEW {db.db}.{name} AS {sql.replace('FROM ', f'FROM {db.db}.')}"
            )
            c.execute(f"GRANT SELECT, SHOW VIEW ON {db.db}.{name} TO '{db.reader}'@'%'")
        yield db


@pytest.mark.mysql
def test_mariadb_views_that_follow_the_scan_order_refuse_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    masks = _masks(tmp_path)
    code, out = _run(
        capsys, "sql", "query", "--dsn", my.reader_url, "--mask", str(masks), "SELECT * FROM v_limit"
    )
    assert code == 2, out
    assert SECRET not in out
    for view in MY_BAD:
        assert f"view {my.db}.{view} may answer in the scan order of a masked table" in out, (view, out)
    for good in MY_GOOD:
        assert f"{my.db}.{good} " not in out, (good, out)
    allow = [a for v in MY_BAD for a in ("--allow", f"view-order:{my.db}.{v}")]
    code, out = _run(
        capsys, "sql", "query", "--dsn", my.reader_url, "--mask", str(masks), *allow,
        "SELECT id, name FROM v_pk_limit",
    )  # fmt: skip
    assert code == 0, out
    assert "| 3 | Cy |" in out


@pytest.mark.mysql
def test_mariadb_a_view_whose_definition_is_hidden_counts(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with my.admin.cursor() as c:
        c.execute(f"REVOKE SHOW VIEW ON {my.db}.v_plain FROM '{my.reader}'@'%'")
    allow = [a for v in MY_BAD for a in ("--allow", f"view-order:{my.db}.{v}")]
    allow += ["--allow", f"view:{my.db}.v_plain"]  # the least-privilege check refuses it too
    code, out = _run(
        capsys,
        "sql",
        "query",
        "--dsn",
        my.reader_url,
        "--mask",
        str(_masks(tmp_path)),
        *allow,
        "SELECT 1 AS x",
    )
    assert code == 2, out
    assert f"view {my.db}.v_plain may answer in the scan order of a masked table: its definition" in out, out


@pytest.mark.mysql
def test_mariadb_grant_leaves_them_out(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = ",".join(f"{my.db}.{t}" for t in ["customers", *MY_BAD, *MY_GOOD])
    code, out = _run(
        capsys, "sql", "grant", "--dsn", my.admin_url, "--role", f"{my.reader}g", "--tables", tables,
        "--mask", str(_masks(tmp_path)),
    )  # fmt: skip
    assert code == 0, out
    for view in MY_BAD:
        assert f"GRANT SELECT ON `{my.db}`.`{view}`" not in out, (view, out)
        assert f"-- left out: view {my.db}.{view} may answer in the scan order of a masked table" in out, (
            view,
            out,
        )
    for view in MY_GOOD:
        assert f"GRANT SELECT ON `{my.db}`.`{view}`" in out, (view, out)


@pytest.mark.postgres
@pytest.mark.anyio
async def test_postgres_a_view_replaced_while_serving_is_checked_again(pg_url: str, tmp_path: Path) -> None:
    # red team rt21 F2: the re-verification after a catalog change ran the mask checks, not this one
    with pg_scratch(pg_url, "vieworder2") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            CREATE INDEX ON customers (email);
            INSERT INTO customers VALUES {rows};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            CREATE VIEW v_inv WITH (security_invoker = true)
                AS SELECT 'x'::text AS a FROM customers WHERE id = 1;
            GRANT SELECT ON v_inv TO {db.reader};
            """
        )
        async with serving_masked(db.reader_url, _masks(tmp_path)) as ask:
            first = await ask("SELECT a FROM v_inv")
            assert "mcpkit/error" not in (first.meta or {}) and "x" in text_of(first)
            db.admin.execute(
                "CREATE OR REPLACE VIEW v_inv WITH (security_invoker = true) AS"
                " SELECT string_agg(id::text, ',') AS a FROM customers"
            )
            leaked = await ask("SELECT a FROM v_inv")
            code = (leaked.meta or {}).get("mcpkit/error", {}).get("code")
            assert code == "SOURCE_UNVERIFIED", text_of(leaked)
            assert "4,1,5" not in text_of(leaked)
