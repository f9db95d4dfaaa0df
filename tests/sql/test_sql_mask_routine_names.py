"""A per-row function is named as the server names it (red team rt34 F4, F6).

MariaDB finds a routine by `utf8mb3_general_ci`, case- and accent-blind: `rt34_t\u0131ck(id)` (dotless i),
`rt34_tíck` and `rt34_t\u0130ck` all ran the counter `rt34_tick`, whose plain spelling masking refused, and
each gave the full e-mail ranking (F6); an INVOKER view calling `rt34_tíck(...)` passed start-up (F6c).
A counter created in the `sys` database was no per-row function at all (F4). PostgreSQL compares
routine names exactly (unquoted ones fold ASCII only): `t\u0131ck(1)` calls no `tick`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

SECRET = "@secret.example"
# Ids out of e-mail order: the e-mail ranking of ids 1..6 is 2, 4, 5, 1, 3, 6.
ROWS = [(1, "b"), (2, "d"), (3, "e"), (4, "a"), (5, "c"), (6, "f")]
RANKS = "| 2 | 4 | 5 | 1 | 3 | 6 |"
PER_ROW = "functions whose value changes from row to row in the order rows are read"


def _ranks(call: str) -> str:
    cols = ", ".join(f"MAX(CASE WHEN id = {i} THEN {call} END) AS r{i}" for i in range(1, 7))
    return f"SELECT {cols} FROM customers"


def _counter(name: str, reader: str, var: str) -> str:
    return (
        f"CREATE DEFINER = {reader} FUNCTION {name}(x int) RETURNS int DETERMINISTIC SQL SECURITY INVOKER"
        f" RETURN (@{var} := COALESCE(@{var}, 0) + 1)"
    )


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt34my") as db, db.admin.cursor() as c:
        d, r = db.db, f"'{db.reader}'@'%'"
        rows = ", ".join(f"({i}, 'n{i}', '{e}{SECRET}')" for i, e in ROWS)
        for sql in (
            f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80),"
            " KEY email_idx (email, id))",
            f"INSERT INTO {d}.customers VALUES {rows}",
            _counter(f"{d}.rt34_tick", r, f"{d}_a"),
            _counter(f"{d}.rt34_tóck", r, f"{d}_b"),  # stored accented, called `rt34_tock`
            f"GRANT SELECT (id, name) ON {d}.customers TO {r}",
            f"GRANT EXECUTE ON {d}.* TO {r}",  # a per-routine grant is checked by the exact name
        ):
            c.execute(sql)
        c.execute(f"USE {d}")
        c.execute(_ranks(f"{d}.rt34_tıck(id)"))
        assert list(c.fetchall()) == [(2, 4, 5, 1, 3, 6)]  # the dotless spelling runs the counter
        yield db


def _args(my: MysqlScratch, tmp_path: Path, *extra: str) -> list[str]:
    masks = masks_file(tmp_path, "customers.email")
    allow = [f"routine:{my.db}.rt34_tick", f"routine:{my.db}.rt34_tóck", *extra]
    return ["--dsn", my.reader_url, "--mask", masks, "--allow-function", f"{my.db}.rt34*"] + [
        a for v in allow for a in ("--allow", v)
    ]


# `rt34_tock` is ASCII and names the stored `rt34_tóck`: the server's weight of the stored name keys it.
@pytest.mark.mysql
@pytest.mark.parametrize("call", ["rt34_tıck", "rt34_tíck", "rt34_tİck", "RT34_TİCK", "rt34_tock"])
def test_mariadb_an_accent_or_case_blind_spelling_of_a_stored_function_is_per_row(
    call: str, my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(capsys, "sql", "query", *_args(my, tmp_path), _ranks(f"{my.db}.{call}(id)"))
    assert code == 3 and RANKS not in out and PER_ROW in out, out  # before: | 2 | 4 | 5 | 1 | 3 | 6 |


@pytest.mark.mysql
def test_mariadb_function_order_accepts_a_stored_function_by_its_stored_name(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The opt-in names the function as stored; a call whose name is not ASCII still counts (fail-closed)."""
    args = _args(my, tmp_path, f"function-order:{my.db}.rt34_tick", f"function-order:{my.db}.rt34_tóck")
    for call, code_ in (("rt34_tick", 0), ("rt34_tock", 0), ("rt34_tıck", 3)):
        sql = f"SELECT id, {my.db}.{call}(id) AS k FROM customers ORDER BY id"
        code, out = _run(capsys, "sql", "query", *args, sql)
        assert code == code_ and (code or "| 1 |" in out), (call, out)


@pytest.mark.mysql
def test_mariadb_an_invoker_view_calling_an_accented_spelling_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, r = my.db, f"'{my.reader}'@'%'"
    with my.admin.cursor() as c:
        view = f"SELECT id, {d}.rt34_tíck(id) AS k FROM {d}.customers"
        c.execute(f"CREATE SQL SECURITY INVOKER VIEW {d}.v_rank AS {view}")
        c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.v_rank TO {r}")
    args = _args(my, tmp_path, f"view:{d}.v_rank")
    code, out = _run(capsys, "sql", "query", *args, _ranks("k").replace("customers", "v_rank"))
    assert code == 2 and RANKS not in out, out  # before: start-up passed and the view answered the ranks
    assert f"view {d}.v_rank may answer in the scan order of a masked table" in out, out


@pytest.mark.mysql
def test_mariadb_a_function_in_the_sys_database_counts_as_per_row(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, r = f"sys.{my.db}_tick", f"'{my.reader}'@'%'"
    with my.admin.cursor() as c:
        c.execute(_counter(name, r, f"{my.db}_s"))
    try:
        with my.admin.cursor() as c:
            c.execute(f"GRANT EXECUTE ON FUNCTION {name} TO {r}")
        args = _args(my, tmp_path, f"routine:{name}")
        code, out = _run(capsys, "sql", "query", *args, "--allow-function", name, _ranks(f"{name}(id)"))
        assert code == 3 and RANKS not in out and PER_ROW in out, out  # before: answered the ranks
    finally:
        with my.admin.cursor() as c:
            c.execute(f"DROP FUNCTION IF EXISTS {name}")


@pytest.mark.postgres
def test_postgres_compares_routine_names_exactly(pg_url: str) -> None:
    """Why PostgreSQL keeps `accent_blind_routines` off: a dotless or accented spelling calls nothing."""
    with pg_scratch(pg_url, "rt34my") as db:
        db.admin.execute("CREATE FUNCTION rt34_tick(x int) RETURNS int LANGUAGE sql AS 'SELECT x + 1'")
        assert db.admin.execute("SELECT RT34_TICK(1)").fetchone() == (2,)
        for spelling in ("rt34_tıck", "rt34_tíck", "rt34_tİck", '"RT34_TICK"'):
            with pytest.raises(psycopg.errors.UndefinedFunction):
                db.admin.execute(f"SELECT {spelling}(1)")
