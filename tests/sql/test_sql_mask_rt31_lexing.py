r"""Bodies PostgreSQL reads otherwise than the checks (red team rt31 F5, F7) and MariaDB stored
aggregate functions (rt31 F6).

- F5 PostgreSQL: `f_a() SET standard_conforming_strings = off BEGIN ATOMIC SELECT f_b(); END`: the
  caller's setting holds while f_b's string body `... ORDER BY 'a\', id, ' -- '` + newline is
  parsed, so PostgreSQL ordered by a constant (the heap order, CLUSTERed on the e-mail index)
  where the check read the primary key. A function of any body kind with such a setting now counts
  as unreadable itself (start-up refused unless `function-order:`) and as a per-row one.
- F7 PostgreSQL: a string body reading `public.U&"cust\006fmers"` was never found by the name
  match: a string body holding `U&"` now counts as naming every masked table and is unreadable.
- F6 MariaDB: `AGGREGATE FUNCTION ... FETCH GROUP NEXT ROW; SET s = CONCAT(s, x, ',')` concatenates
  in arrival order; over a derived table it answered the ids in e-mail index order. A compound
  body counts as per-row (rt29b, merged before this test), so the call is refused.

Before the fix (main at e302d28), a direct call of the F5/F7 functions was refused per call, only
because the per-row proof could not parse the bodies; a view over each answered the ranking.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sql.sql_support import (
    MysqlScratch,
    PgScratch,
    masks_file,
    mysql_customers,
    mysql_scratch,
    pg_customers,
    pg_scratch,
    row_order_routines,
    run_cli,
)

# The ids of `sql_support.CUSTOMERS_ROWS` in e-mail order.
RANKING = "4,1,5,2,3"
REFUSED = "may answer in the scan order of a masked table"
PG_BODY = "SELECT string_agg(id::text, ',' ORDER BY 'a\\', id, ' -- '\n) FROM public.customers"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt31b") as db:
        pg_customers(db)
        yield db


def _pg_fn(db: PgScratch, name: str, rest: str) -> None:
    db.admin.execute(f"CREATE FUNCTION {name} {rest}")
    db.admin.execute(f"GRANT EXECUTE ON FUNCTION {name.split('(')[0]} TO {db.reader}")


def _allow(*items: str) -> list[str]:
    return [a for item in items for a in ("--allow", item)]


@pytest.mark.postgres
def test_postgres_a_callers_setting_counts_whatever_its_body_kind(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quoted = "'" + PG_BODY.replace("'", "''") + "'"
    _pg_fn(pg, "f_b()", f"RETURNS text LANGUAGE sql STABLE AS {quoted}")
    _pg_fn(pg, "f_a()", "RETURNS text LANGUAGE sql STABLE SET standard_conforming_strings = off BEGIN ATOMIC "
           "SELECT f_b(); END")  # fmt: skip
    # reads nothing at all: what it runs may still reach a masked table through an operator or a cast
    _pg_fn(pg, "f_lone()", "RETURNS int LANGUAGE sql STABLE SET transform_null_equals = on RETURN 1")
    # a procedure's settings hold for what it runs too (a SQL function's body may CALL it)
    pg.admin.execute(
        "CREATE PROCEDURE p_scs() LANGUAGE sql SET standard_conforming_strings = off AS 'SELECT 1'"
    )
    pg.admin.execute(f"GRANT EXECUTE ON PROCEDURE p_scs() TO {pg.reader}")
    # control: a setting read alike
    _pg_fn(
        pg, "f_mem()", "RETURNS text LANGUAGE sql STABLE SET work_mem = '4MB' BEGIN ATOMIC SELECT f_b(); END"
    )
    assert pg.admin.execute("SELECT f_a(), f_b(), f_mem()").fetchone() == (RANKING, "1,2,3,4,5", "1,2,3,4,5")
    pg.admin.execute(f"CREATE VIEW v_a AS SELECT f_a() AS r; GRANT SELECT ON v_a TO {pg.reader}")
    masks = masks_file(tmp_path, "customers.email")
    names = ("f_a", "f_b", "f_lone", "f_mem")
    allow = _allow(*(f"function:public.{f}" for f in names), *(f"function-config:public.{f}" for f in names))
    args = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow, *_allow("view:public.v_a")]
    code, out = run_cli(capsys, *args, "SELECT r FROM public.v_a")
    assert code == 2, out  # before: | 4,1,5,2,3 |
    assert RANKING not in out
    assert f"function public.f_a {REFUSED}: its own setting standard_conforming_strings=off" in out, out
    assert f"function public.f_lone {REFUSED}: its own setting transform_null_equals=on" in out, out
    assert f"function public.p_scs {REFUSED}: its own setting standard_conforming_strings=off" in out, out
    assert "--allow function-order:public.f_a" in out
    assert f"view public.v_a {REFUSED}" in out, out
    assert "public.f_b " not in out and f"f_mem {REFUSED}: its own" not in out, out  # controls: read alike
    assert f"function public.f_mem {REFUSED}: it calls f_b" in out, out  # a user function: per-row
    opted = [
        *args,
        *_allow(*(f"function-order:public.{f}" for f in ("f_a", "f_lone", "p_scs", "f_mem", "f_b"))),
    ]
    opted += _allow("view-order:public.v_a")
    code, out = run_cli(capsys, *opted, "SELECT public.f_b() AS b")
    assert code == 0, out
    assert "| 1,2,3,4,5 |" in out


@pytest.mark.postgres
def test_postgres_a_unicode_escaped_name_counts_as_naming_every_masked_table(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = "SELECT string_agg(id::text, ',') FROM public.{t}"
    _pg_fn(pg, "f_u()", "RETURNS text LANGUAGE sql STABLE AS $$" + body.format(t='U&"cust\\006fmers"') + "$$")
    _pg_fn(pg, "f_ue()", "RETURNS text LANGUAGE sql STABLE AS $$"
           + body.format(t='u&"cust!006fmers" UESCAPE \'!\'') + "$$")  # fmt: skip
    ordered = "SELECT string_agg(id::text, ',' ORDER BY id) FROM public.customers"
    _pg_fn(pg, "f_ok()", f"RETURNS text LANGUAGE sql STABLE AS $${ordered}$$")  # control
    assert pg.admin.execute("SELECT f_u(), f_ue(), f_ok()").fetchone() == (RANKING, RANKING, "1,2,3,4,5")
    pg.admin.execute(f"CREATE VIEW v_u AS SELECT f_u() AS r; GRANT SELECT ON v_u TO {pg.reader}")
    masks = masks_file(tmp_path, "customers.email")
    args = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks]
    args += _allow("function:public.f_u", "function:public.f_ue", "function:public.f_ok", "view:public.v_u")
    code, out = run_cli(capsys, *args, "SELECT r FROM public.v_u")
    assert code == 2, out  # before: | 4,1,5,2,3 | (and refused per call: `SELECT f_u()`)
    assert RANKING not in out
    for name in ("f_u", "f_ue"):
        assert (
            f'function public.{name} {REFUSED}: its body spells a name with Unicode escapes (U&"...")' in out
        )
    assert f"view public.v_u {REFUSED}: it reads function public.f_u" in out, out
    assert "public.f_ok " not in out, out
    opted = [
        *args,
        *_allow("function-order:public.f_u", "function-order:public.f_ue", "view-order:public.v_u"),
        *_allow("function-order:public.f_ok"),  # a user function called over a masked read: per-row
    ]
    code, out = run_cli(capsys, *opted, "SELECT public.f_ok() AS b")
    assert code == 0, out
    assert "| 1,2,3,4,5 |" in out


@pytest.mark.postgres
def test_postgres_settings_and_escaped_names_count_as_per_row(pg: PgScratch) -> None:
    # The per-row proof once read these bodies (rt31 F5, F7); now every user function counts.
    _pg_fn(pg, "g_scs(x int)", "RETURNS int LANGUAGE sql IMMUTABLE SET standard_conforming_strings = off "
           "RETURN x * 2")  # fmt: skip
    _pg_fn(pg, "g_calls(x int)", "RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT g_scs(x) + 1'")
    _pg_fn(pg, "g_u(x int)", 'RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT U&"\\0078" * 2 $$')
    pg.admin.execute(
        "CREATE PROCEDURE p_scs() LANGUAGE sql SET standard_conforming_strings = off AS 'SELECT 1'"
    )
    pg.admin.execute(f"GRANT EXECUTE ON PROCEDURE p_scs() TO {pg.reader}")
    _pg_fn(pg, "g_call(x int)", "RETURNS int LANGUAGE sql IMMUTABLE AS 'CALL p_scs(); SELECT x'")
    _pg_fn(pg, "g_ok(x int)", "RETURNS int LANGUAGE sql IMMUTABLE SET work_mem = '4MB' AS 'SELECT x * 2'")

    found = row_order_routines(pg.reader_url)
    assert {n for _, n in found} == {"g_scs", "g_calls", "g_u", "g_call", "g_ok"}, found


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt31b") as db:
        mysql_customers(db, "KEY email_idx (email)")
        yield db


MY_AGGREGATE = """
CREATE DEFINER = '{r}'@'%' AGGREGATE FUNCTION {d}.{name}(x INT) RETURNS TEXT DETERMINISTIC
SQL SECURITY INVOKER
BEGIN
  DECLARE s TEXT DEFAULT '';
  DECLARE CONTINUE HANDLER FOR NOT FOUND RETURN s;
  LOOP
    FETCH GROUP NEXT ROW;
    SET s = CONCAT(s, x, ',');
  END LOOP;
END
"""


@pytest.mark.mysql
def test_mariadb_a_stored_aggregate_function_counts_as_order_dependent(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with my.admin.cursor() as c:
        c.execute(MY_AGGREGATE.format(r=my.reader, d=my.db, name="agg"))
        c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.agg TO '{my.reader}'@'%'")
        c.execute(f"SELECT s FROM (SELECT {my.db}.agg(id) AS s FROM {my.db}.customers) d")
        assert c.fetchone() == (f"{RANKING},",)  # what the red team read: the e-mail index order
    masks = masks_file(tmp_path, "customers.email")
    base = ["sql", "query", "--dsn", my.reader_url, "--mask", masks, *_allow(f"routine:{my.db}.agg")]
    query = f"SELECT s FROM (SELECT agg(id) AS s FROM {my.db}.customers) d"
    code, out = run_cli(capsys, *base, "--allow-function", "agg", query)
    assert code == 3, out  # before (9d218e8): | 4,1,5,2,3, |
    assert "functions whose value changes from row to row" in out
    assert RANKING not in out
    # a view over it, whose definer reads the e-mails: refused at start-up
    with my.admin.cursor() as c:
        c.execute(
            f"CREATE SQL SECURITY DEFINER VIEW {my.db}.v_agg AS"
            f" SELECT {my.db}.agg(id) AS s FROM {my.db}.customers"
        )
        c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.v_agg TO '{my.reader}'@'%'")
    code, out = run_cli(capsys, *base, *_allow(f"view:{my.db}.v_agg"), "SELECT 1 AS x")
    assert code == 2, out
    assert f"view {my.db}.v_agg {REFUSED}: it calls agg, whose value changes from row to row" in out, out

    found = row_order_routines(my.reader_url)
    assert (my.db, "agg") in found
