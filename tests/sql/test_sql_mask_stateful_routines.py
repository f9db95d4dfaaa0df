"""A routine that keeps state from row to row numbers the rows in a masked scan order (red team rt29 F1, F2).

MariaDB: `RETURN (@c := COALESCE(@c, 0) + 1)` under a DETERMINISTIC label, over `customers` with
`KEY(email, id)`, gave each id's e-mail rank through a DEFINER view (F1) and called directly with
`--allow-function` (F2). PostgreSQL: a STABLE SQL function counting with `set_config` did the same
per call. The label is no longer trusted: a body not proven stateless counts as a per-row function.
Controls: genuinely stateless routines (arithmetic, strings) still answer.
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
            " RETURN x * 2 + LENGTH(CONCAT('a', x))",
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
def test_mariadb_a_deterministic_counter_in_a_definer_view_refuses_start_up(
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
    assert "v_twice" not in out, out  # a stateless DETERMINISTIC function passes
    opt_in = ["--allow", f"view-order:{my.db}.v_ctr"]
    code, out = _run(
        capsys, "sql", "query", *_my_args(my, tmp_path), *opt_in, "SELECT id, k FROM v_twice ORDER BY id"
    )
    assert code == 0 and "| 1 | 4 |" in out, out


@pytest.mark.mysql
def test_mariadb_a_deterministic_counter_called_directly_is_refused(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpkit.sql")  # an in-process doctor run left it at ERROR
    args = [*_my_args(my, tmp_path), "--allow", f"view-order:{my.db}.v_ctr"]
    args += ["--allow-function", "ctr", "--allow-function", "twice"]
    code, out = _run(capsys, "sql", "query", *args, _ranks("ctr()"))
    assert code == 3 and RANKS not in out, out  # before: | 2 | 4 | 5 | 1 | 3 | 6 |
    assert PER_ROW in out and "@" not in out.split("REFUSED", 1)[1], out
    assert (
        f"function {my.db}.ctr counts as a per-row function over masked reads: its body reads or assigns"
        in (caplog.text)
    )
    assert f"function {my.db}.twice counts" not in caplog.text
    code, out = _run(capsys, "sql", "query", *args, "SELECT id, twice(id) AS k FROM customers ORDER BY id")
    assert code == 0 and "| 1 | 4 |" in out, out


@pytest.mark.mysql
def test_mariadb_a_body_replaced_while_serving_fails_the_reverification(my: MysqlScratch) -> None:
    engine = SqlEngine(my.reader_url)
    try:
        engine.profile.use_function_policy(FunctionPolicy.for_dialect("mysql", extra=["ctr", "twice"]))
        known = KnownSchema({}, "mysql")
        known.per_row = frozenset({"ctr"})  # as start-up found it
        allow = [f"view-order:{my.db}.v_ctr", f"view-order:{my.db}.v_twice"]
        verify = order_check(
            MaskPolicy.of(["customers.email"]), known, {"customers": frozenset({"email"})}, allow
        )
        with engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # nothing changed
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE OR REPLACE DEFINER = '{my.reader}'@'%' FUNCTION {my.db}.twice(x int) RETURNS int"
                " DETERMINISTIC SQL SECURITY INVOKER RETURN x + (@rt29b_t := COALESCE(@rt29b_t, 0) + 1)"
            )
        changed = f"function {my.db}.twice may now change from row to row"
        with pytest.raises(SqlConfigError, match=changed), engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)
    finally:
        engine.close()


BODIES = {  # name -> (body after RETURNS int, counts as per-row)
    "f_pure": ("DETERMINISTIC RETURN ABS(x) * 3 + CHAR_LENGTH(UPPER(CONCAT('a@b', x)))", False),
    "f_nested": ("DETERMINISTIC RETURN f_pure(x) + 1", False),
    "f_calls_ctr": ("DETERMINISTIC RETURN x + ctr()", True),
    "f_reads_var": ("DETERMINISTIC RETURN x + COALESCE(@rt29b_v, 0)", True),
    "f_sysvar": ("DETERMINISTIC RETURN x + @@warning_count", True),
    "f_rand": ("DETERMINISTIC RETURN FLOOR(RAND() * x)", True),
    "f_uuid_short": ("DETERMINISTIC RETURN UUID_SHORT() % 10", True),
    "f_sequence": ("DETERMINISTIC RETURN NEXT VALUE FOR rt29b_s", True),
    "f_compound": (
        "DETERMINISTIC BEGIN SET @rt29b_w = COALESCE(@rt29b_w, 0) + 1; RETURN @rt29b_w; END",
        True,
    ),
    "f_into": ("DETERMINISTIC BEGIN DECLARE r int; SELECT x INTO @rt29b_i; RETURN x; END", True),
    "f_label": ("NOT DETERMINISTIC RETURN x + 1", True),
}


@pytest.mark.mysql
def test_mariadb_only_a_body_proven_stateless_passes(my: MysqlScratch) -> None:
    with my.admin.cursor() as c:
        c.execute(f"CREATE SEQUENCE {my.db}.rt29b_s")
        for name, (body, _) in BODIES.items():
            c.execute(f"CREATE DEFINER = '{my.reader}'@'%' FUNCTION {my.db}.{name}(x int) RETURNS int {body}")
        c.execute(f"CREATE FUNCTION {my.db}.f_hidden(x int) RETURNS int DETERMINISTIC RETURN x")  # root's
        c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.f_hidden TO '{my.reader}'@'%'")
    found = {n: why for (_, n), why in row_order_routines(my.reader_url).items()}
    for name, (_, counts) in BODIES.items():
        assert (name in found) is counts, (name, found.get(name))
    assert "hidden" in found["f_hidden"] and "twice" not in found and "ctr" in found


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
            CREATE FUNCTION twice(x int) RETURNS int LANGUAGE sql IMMUTABLE
                AS $$ SELECT x * 2 + length(x::text) $$;
            """
        )
        yield db


@pytest.mark.postgres
def test_postgres_a_stable_set_config_counter_called_directly_is_refused(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcpkit.sql")  # an in-process doctor run left it at ERROR
    masks = masks_file(tmp_path, "customers.email")
    args = ["--dsn", pg.reader_url, "--mask", masks, *UNBOUNDED_MEMORY]
    args += ["--allow", "function:public.ctr", "--allow", "function:public.twice"]
    args += ["--allow-function", "ctr", "--allow-function", "twice"]
    code, out = _run(capsys, "sql", "query", *args, "SELECT id, ctr(id) AS k FROM customers ORDER BY id")
    assert code == 3 and PER_ROW in out, out  # before: k 3, 7, 9, 1, 5, 11: the e-mail ranking
    assert (
        "function public.ctr counts as a per-row function over masked reads: it calls set_config"
        in caplog.text
    )
    assert "public.twice counts" not in caplog.text
    code, out = _run(capsys, "sql", "query", *args, "SELECT id, twice(id) AS k FROM customers ORDER BY id")
    assert code == 0 and "| 1 | 3 |" in out, out


@pytest.mark.mysql
def test_mariadb_a_counter_behind_a_name_sqlglot_renders_as_a_built_in_is_found(my: MysqlScratch) -> None:
    # Red team rt32 F2: sqlglot reads `len(i)` as LENGTH; MariaDB has no built-in `len` and calls the
    # stored function `len`, here a NOT DETERMINISTIC counter: `tick` was proven stateless.

    d, r = my.db, f"'{my.reader}'@'%'"
    with my.admin.cursor() as c:
        c.execute(
            f"CREATE DEFINER = {r} FUNCTION {d}.len(x int) RETURNS int NOT DETERMINISTIC NO SQL"
            " RETURN (@rt32c := COALESCE(@rt32c, 0) + 1)"
        )
        c.execute(
            f"CREATE DEFINER = {r} FUNCTION {d}.tick(i int) RETURNS int DETERMINISTIC NO SQL RETURN len(i)"
        )
        c.execute(
            f"CREATE DEFINER = {r} FUNCTION {d}.tock(i int) RETURNS int DETERMINISTIC NO SQL RETURN LENGTH(i)"
        )
    found = row_order_routines(my.reader_url)
    assert f"it calls function {d}.len, which may keep state" in found.get((d, "tick"), ""), found
    assert (d, "tock") not in found  # control: the built-in LENGTH


@pytest.mark.postgres
def test_postgres_counters_behind_defaults_rewritten_names_and_operators_are_found(pg: PgScratch) -> None:
    # Red team rt32 F3: a parameter default is evaluated at each call (a set_config counter in it);
    # F1: sqlglot renders `ifnull(x, 0)` as COALESCE (PostgreSQL calls the user's `ifnull`), and a
    # user operator's function is no call in the body's tree.

    pg.admin.execute(
        """
        CREATE FUNCTION with_default(i int, n int DEFAULT ctr(0)) RETURNS int LANGUAGE sql STABLE
            AS $$ SELECT $2 $$;
        CREATE FUNCTION ifnull(a int, b int) RETURNS int LANGUAGE plpgsql STABLE
            AS $$ BEGIN RETURN coalesce(a, b); END $$;
        CREATE FUNCTION via_ifnull(i int) RETURNS int LANGUAGE sql STABLE AS $$ SELECT ifnull($1, 0) $$;
        CREATE FUNCTION plus_text(a int, b text) RETURNS int LANGUAGE plpgsql STABLE
            AS $$ BEGIN RETURN a; END $$;
        CREATE OPERATOR + (LEFTARG = int, RIGHTARG = text, FUNCTION = plus_text);
        CREATE FUNCTION via_operator(i int) RETURNS int LANGUAGE sql STABLE AS $$ SELECT $1 + 'x'::text $$;
        CREATE FUNCTION plain(i int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce($1, 0) * 2 $$;
        """
    )
    found = {name: why for (_, name), why in row_order_routines(pg.admin_url).items()}
    assert "parameter defaults" in found.get("with_default", ""), found
    assert "it calls function ifnull" in found.get("via_ifnull", ""), found
    assert "it uses +, an operator" in found.get("via_operator", ""), found
    assert "plain" not in found  # control
