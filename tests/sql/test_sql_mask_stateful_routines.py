"""Every user function counts as a per-row function over masked reads (red teams rt29, rt31, rt32).

MariaDB: `RETURN (@c := COALESCE(@c, 0) + 1)` under a DETERMINISTIC label, over `customers` with
`KEY(email, id)`, gave each id's e-mail rank through a DEFINER view (rt29 F1) and called directly with
`--allow-function` (F2). PostgreSQL: a STABLE SQL function counting with `set_config` did the same
per call. A proof that a body keeps no state was got past three rounds in a row (rt32: `len` read as
LENGTH, `ifnull` as COALESCE, a parameter DEFAULT, a user operator, a domain CHECK), so no body is
read any more: a function whose body looks stateless (`RETURN x + 1`) is refused like the counter,
and `--allow function-order:S.N` accepts it. On PostgreSQL an operator, a cast or a domain CHECK
runs a user function the query does not name: start-up refuses it the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.maskcheck import order_check
from mcpkit.sql.masking import KnownSchema, MaskPolicy
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
# Ids out of e-mail order: the e-mail ranking of ids 1..6 is 2, 4, 5, 1, 3, 6.
ROWS = [(1, "b"), (2, "d"), (3, "e"), (4, "a"), (5, "c"), (6, "f")]
RANKS = "| 2 | 4 | 5 | 1 | 3 | 6 |"
PER_ROW = "functions whose value changes from row to row in the order rows are read"


def _ranks(call: str) -> str:
    cols = ", ".join(f"MAX(CASE WHEN id = {i} THEN {call} END) AS r{i}" for i in range(1, 7))
    return f"SELECT {cols} FROM customers"


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt29b") as db, db.admin.cursor() as c:
        d, r = db.db, f"'{db.reader}'@'%'"
        rows = ", ".join(f"({i}, 'n{i}', '{e}{SECRET}')" for i, e in ROWS)
        for sql in (
            f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80),"
            " KEY email_idx (email, id))",
            f"INSERT INTO {d}.customers VALUES {rows}",
            f"CREATE DEFINER = {r} FUNCTION {d}.ctr() RETURNS int DETERMINISTIC SQL SECURITY INVOKER"
            " RETURN (@rt29b_c := COALESCE(@rt29b_c, 0) + 1)",
            f"CREATE DEFINER = {r} FUNCTION {d}.twice(x int) RETURNS int DETERMINISTIC SQL SECURITY INVOKER"
            " RETURN x + 1",
            f"CREATE VIEW {d}.v_ctr AS SELECT id, {d}.ctr() AS k FROM {d}.customers",
            f"CREATE VIEW {d}.v_twice AS SELECT id, {d}.twice(id) AS k FROM {d}.customers",
            f"GRANT SELECT (id, name) ON {d}.customers TO {r}",
        ):
            c.execute(sql)
        for view in ("v_ctr", "v_twice"):
            c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.{view} TO {r}")
        for fn in ("ctr", "twice"):
            c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO {r}")
        yield db


def _my_args(my: MysqlScratch, tmp_path: Path) -> list[str]:
    d = my.db
    allow = [f"view:{d}.v_ctr", f"view:{d}.v_twice", f"routine:{d}.ctr", f"routine:{d}.twice"]
    masks = masks_file(tmp_path, "customers.email")
    return ["--dsn", my.reader_url, "--mask", masks, *[a for v in allow for a in ("--allow", v)]]


@pytest.mark.mysql
def test_mariadb_a_view_calling_any_stored_function_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with my.admin.cursor() as c:  # the counter does number the rows in the e-mail's order
        c.execute(f"SELECT id, k FROM {my.db}.v_ctr")
        assert sorted(c.fetchall()) == [(1, 2), (2, 4), (3, 5), (4, 1), (5, 3), (6, 6)]
    code, out = _run(
        capsys, "sql", "query", *_my_args(my, tmp_path), _ranks("k").replace("customers", "v_ctr")
    )
    assert code == 2 and RANKS not in out, out  # before: answered the ranks
    assert f"view {my.db}.v_ctr may answer in the scan order of a masked table: it calls ctr" in out, out
    # `RETURN x + 1` counts too (before: passed as proven stateless)
    assert f"view {my.db}.v_twice may answer in the scan order of a masked table: it calls twice" in out, out
    opt_in = ["--allow", f"view-order:{my.db}.v_ctr", "--allow", f"function-order:{my.db}.twice"]
    code, out = _run(
        capsys, "sql", "query", *_my_args(my, tmp_path), *opt_in, "SELECT id, k FROM v_twice ORDER BY id"
    )
    assert code == 0 and "| 1 | 2 |" in out, out


@pytest.mark.mysql
def test_mariadb_a_deterministic_function_called_over_a_masked_read_is_refused(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpkit.sql")  # an in-process doctor run left it at ERROR
    args = [
        *_my_args(my, tmp_path),
        "--allow",
        f"view-order:{my.db}.v_ctr",
        "--allow",
        f"view-order:{my.db}.v_twice",
    ]
    args += ["--allow-function", "ctr", "--allow-function", "twice"]
    code, out = _run(capsys, "sql", "query", *args, _ranks("ctr()"))
    assert code == 3 and RANKS not in out, out  # before: | 2 | 4 | 5 | 1 | 3 | 6 |
    assert PER_ROW in out and "@" not in out.split("REFUSED", 1)[1], out
    twice = "SELECT id, twice(id) AS k FROM customers ORDER BY id"
    code, out = _run(capsys, "sql", "query", *args, twice)
    assert code == 3 and PER_ROW in out, out  # before: answered, `RETURN x + 1` proven stateless
    for fn in ("ctr", "twice"):
        line = (
            f"function {my.db}.{fn} counts as a per-row function over masked reads: it is a stored function"
        )
        assert caplog.text.count(line) == 2, caplog.text  # one line each, per start-up
    code, out = _run(capsys, "sql", "query", *args, "--allow", f"function-order:{my.db}.twice", twice)
    assert code == 0 and "| 1 | 2 |" in out, out


@pytest.mark.mysql
def test_mariadb_a_function_created_while_serving_fails_the_reverification(my: MysqlScratch) -> None:
    engine = SqlEngine(my.reader_url)
    try:
        # a pattern: a name of its own would count at start-up already (red team rt35b F1)
        policy = FunctionPolicy.for_dialect("mysql", extra=["ctr", "twice", "thr*"])
        engine.profile.use_function_policy(policy)
        known = KnownSchema({}, "mysql")
        known.per_row = frozenset({"ctr", "twice"})  # as start-up found it
        allow = [f"view-order:{my.db}.v_ctr", f"view-order:{my.db}.v_twice"]
        verify = order_check(
            MaskPolicy.of(["customers.email"]), known, {"customers": frozenset({"email"})}, allow
        )
        with engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # nothing changed
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE DEFINER = '{my.reader}'@'%' FUNCTION {my.db}.thrice(x int) RETURNS int"
                " DETERMINISTIC SQL SECURITY INVOKER RETURN x * 3"
            )
        changed = f"function {my.db}.thrice may now change from row to row"
        with pytest.raises(SqlConfigError, match=changed), engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)
    finally:
        engine.close()


BODIES = {  # name -> body after RETURNS int: each counts, whatever it holds
    "f_pure": "DETERMINISTIC RETURN ABS(x) * 3 + CHAR_LENGTH(UPPER(CONCAT('a@b', x)))",
    "f_nested": "DETERMINISTIC RETURN f_pure(x) + 1",
    "f_reads_var": "DETERMINISTIC RETURN x + COALESCE(@rt29b_v, 0)",
    "f_compound": "DETERMINISTIC BEGIN SET @rt29b_w = COALESCE(@rt29b_w, 0) + 1; RETURN @rt29b_w; END",
    "f_label": "NOT DETERMINISTIC RETURN x + 1",
    "len": "NOT DETERMINISTIC NO SQL RETURN (@rt32c := COALESCE(@rt32c, 0) + 1)",
    "tick": "DETERMINISTIC NO SQL RETURN len(x)",  # rt32 F2: sqlglot reads `len` as LENGTH
}


@pytest.mark.mysql
def test_mariadb_every_stored_function_counts_whatever_its_body(my: MysqlScratch) -> None:
    with my.admin.cursor() as c:
        for name, body in BODIES.items():
            c.execute(f"CREATE DEFINER = '{my.reader}'@'%' FUNCTION {my.db}.{name}(x int) RETURNS int {body}")
        c.execute(f"CREATE FUNCTION {my.db}.f_hidden(x int) RETURNS int DETERMINISTIC RETURN x")  # root's
        c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.f_hidden TO '{my.reader}'@'%'")
    found = {n: why for (_, n), why in row_order_routines(my.reader_url).items()}
    assert set(found) == {*BODIES, "f_hidden", "ctr", "twice"}, found
    assert all("it is a stored function" in why for why in found.values()), found


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt29b") as db:
        rows = ", ".join(f"({i}, 'n{i}', '{e}{SECRET}')" for i, e in ROWS)
        counter = (
            "SELECT set_config('rt29b.c', (coalesce(nullif(current_setting('rt29b.c', true), ''), '0')"
            "::int + 1)::text, false)::int"
        )
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL);
            INSERT INTO customers VALUES {rows};
            CREATE INDEX customers_email ON customers (email, id);
            CLUSTER customers USING customers_email;
            ANALYZE customers;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            CREATE FUNCTION ctr(x int) RETURNS int LANGUAGE sql STABLE AS $$ {counter} $$;
            CREATE FUNCTION twice(x int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT x + 1 $$;
            """
        )
        yield db


def _pg_args(pg: PgScratch, tmp_path: Path) -> list[str]:
    masks = masks_file(tmp_path, "customers.email")
    args = ["--dsn", pg.reader_url, "--mask", masks, *UNBOUNDED_MEMORY]
    return [*args, "--allow", "function:public.ctr", "--allow", "function:public.twice"]


@pytest.mark.postgres
def test_postgres_a_user_function_called_over_a_masked_read_is_refused(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpkit.sql")  # an in-process doctor run left it at ERROR
    args = [*_pg_args(pg, tmp_path), "--allow-function", "ctr", "--allow-function", "twice"]
    code, out = _run(capsys, "sql", "query", *args, "SELECT id, ctr(id) AS k FROM customers ORDER BY id")
    assert code == 3 and PER_ROW in out, out  # before: k 3, 7, 9, 1, 5, 11: the e-mail ranking
    twice = "SELECT id, twice(id) AS k FROM customers ORDER BY id"
    code, out = _run(capsys, "sql", "query", *args, twice)
    assert code == 3 and PER_ROW in out, out  # before: answered, `SELECT x + 1` proven stateless
    assert "function public.twice counts as a per-row function over masked reads: it is a user" in caplog.text
    code, out = _run(capsys, "sql", "doctor", *args)
    assert (
        out.count("warn masks: function public.twice counts as a per-row function over masked reads") == 1
    ), out
    code, out = _run(capsys, "sql", "query", *args, "--allow", "function-order:public.twice", twice)
    assert code == 0 and "| 1 | 2 |" in out, out


@pytest.mark.postgres
def test_postgres_every_user_function_counts_whatever_its_body(pg: PgScratch) -> None:
    # Red team rt32: a parameter default (F3), `ifnull` read as COALESCE and a user operator (F1) got a
    # counter past the proof; a plain SQL body and an aggregate count as well now.
    pg.admin.execute(
        """
        CREATE FUNCTION with_default(i int, n int DEFAULT ctr(0)) RETURNS int LANGUAGE sql STABLE
            AS $$ SELECT $2 $$;
        CREATE FUNCTION ifnull(a int, b int) RETURNS int LANGUAGE sql STABLE AS $$ SELECT coalesce(a, b) $$;
        CREATE FUNCTION plain(i int) RETURNS int LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT i * 2; END;
        CREATE FUNCTION cat_step(s text, x int) RETURNS text LANGUAGE sql IMMUTABLE
            BEGIN ATOMIC SELECT s || x::text; END;
        CREATE AGGREGATE cat1(int) (sfunc = cat_step, stype = text, initcond = '');
        """
    )
    found = {name: why for (_, name), why in row_order_routines(pg.admin_url).items()}
    assert set(found) == {"ctr", "twice", "with_default", "ifnull", "plain", "cat_step", "cat1"}, found
    assert all("it is a user function" in why for why in found.values()), found


@pytest.mark.postgres
def test_postgres_an_operator_over_a_user_function_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An IMMUTABLE SQL-standard body the route audit accepts, reached through `id + true`: the query
    # names no user function, so start-up refuses it (before: answered, the per-call check saw `+`).
    pg.admin.execute(
        """
        CREATE FUNCTION f_op(a int, b boolean) RETURNS int LANGUAGE sql IMMUTABLE
            BEGIN ATOMIC SELECT a + b::int; END;
        CREATE OPERATOR public.+ (leftarg = int, rightarg = boolean, function = f_op);
        """
    )
    sql = "SELECT id, id + true AS k FROM customers ORDER BY id"
    code, out = _run(capsys, "sql", "query", *_pg_args(pg, tmp_path), sql)
    assert code == 2 and "| 1 | 2 |" not in out, out
    assert (
        "function public.f_op may answer in the scan order of a masked table:"
        " operator public.+(integer,boolean) runs it for each row a query reads" in out
    ), out
    assert "--allow function-order:public.f_op" in out, out
    opt_in = ["--allow", "function-order:public.f_op"]
    code, out = _run(capsys, "sql", "query", *_pg_args(pg, tmp_path), *opt_in, sql)
    assert code == 0 and "| 1 | 2 |" in out, out


@pytest.mark.postgres
def test_postgres_a_domain_check_calling_a_counter_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The rt32 residual: a cast to a domain runs its CHECK for each row, here the set_config counter,
    # which current_setting then reads in the same row: the e-mail ranking with no user call named.
    pg.admin.execute("CREATE DOMAIN counted AS int CHECK (ctr(VALUE) > 0)")
    setting = "current_setting('rt29b.c')"
    sql = f"SELECT id, CAST(id AS counted) AS v, {setting} AS k FROM customers ORDER BY id"
    args = [*_pg_args(pg, tmp_path), "--allow-function", "current_setting"]
    code, out = _run(capsys, "sql", "query", *args, sql)
    assert code == 2, out
    assert (
        "function public.ctr may answer in the scan order of a masked table:"
        " the CHECK of domain public.counted runs it for each row a query reads" in out
    ), out
    code, out = _run(capsys, "sql", "query", *args, "--allow", "function-order:public.ctr", sql)
    assert code == 0, out  # accepted: the order it hands on is the operator's choice


@pytest.mark.postgres
def test_postgres_a_view_calling_a_user_function_sqlglot_renders_as_a_built_in_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Red team rt32 F1 in a view: sqlglot reads `ifnull(id, 0)` as COALESCE, PostgreSQL calls the
    # user's `ifnull`, here the counter: the view answered the e-mail ranking with no finding.
    pg.admin.execute(
        f"""
        CREATE FUNCTION ifnull(a int, b int) RETURNS int LANGUAGE sql STABLE AS $$ SELECT ctr(a) $$;
        CREATE VIEW v_if WITH (security_invoker = on) AS SELECT id, ifnull(id, 0) AS k FROM customers;
        GRANT SELECT ON v_if TO {pg.reader};
        """
    )
    args = [*_pg_args(pg, tmp_path), "--allow", "function:public.ifnull"]
    code, out = _run(capsys, "sql", "query", *args, "SELECT id, k FROM v_if ORDER BY id")
    assert code == 2 and "| 4 | 1 |" not in out, out  # before: k 2, 4, 5, 1, 3, 6, the ranking
    assert "view public.v_if may answer in the scan order of a masked table: it calls ifnull" in out, out
    opt_in = ["--allow", "function-order:public.ifnull"]
    code, out = _run(capsys, "sql", "query", *args, *opt_in, "SELECT id FROM v_if ORDER BY id")
    assert code == 0 and "| 6 |" in out, out
