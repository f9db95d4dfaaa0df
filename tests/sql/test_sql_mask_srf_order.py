"""Set-returning calls and a masked scan order (red team rt27 F8, F9).

F8: a non-SETOF SQL function whose body is `SELECT s.g()` (g `RETURNS SETOF int AS 'SELECT id
FROM customers'`) was read as a FROM-less block, one row: it answered g's first row, the id of the
smallest e-mail (customers CLUSTERed on the e-mail index). A view `SELECT id, s.g() FROM items
ORDER BY id LIMIT 1` was "ordered on its whole key" while g multiplied its rows. Start-up now
refuses both (`function-order:` / `view-order:`).
F9: a call numbering g's rows as they come out (`WITH ORDINALITY`, `ROWS FROM (g(), ...)`, two
set-returning calls in one select list) answered the exact e-mail rank; it is refused, and a call
of a user's function counts as a masked read, so its rows are ordered by visible values.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.masking import KnownSchema, MaskPolicy, MaskRefused, plan_masking
from mcpkit.sql.masking.view_order import order_reason
from tests.sql.sql_support import PgScratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

SCHEMA = {"customers": {"id": "INT", "email": "TEXT"}, "items": {"id": "INT", "label": "TEXT"}}
POLICY = MaskPolicy.of(["customers.email"])
KNOWN = KnownSchema(SCHEMA, "postgres")


def _pk(schema: str | None, table: str) -> list[frozenset[str]]:
    return [frozenset({"id"})]


def _reason(sql: str, one_row: bool = False) -> str | None:
    return order_reason(sql, "postgres", KNOWN, POLICY, _pk, one_row=one_row)


# --- F8: stored bodies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "one_row"),
    [
        ("SELECT s.g()", True),  # the repro: the first row of g
        ("SELECT unnest(ARRAY[1, 2]) * 0 + s.g()", True),
        ("SELECT max(id), s.g() FROM items", True),  # an aggregate block is no longer one row
        ("SELECT id, s.g() AS x FROM items ORDER BY id LIMIT 1", False),  # F8b: the key has ties
        ("SELECT a, n FROM s.g() WITH ORDINALITY AS r(a, n)", False),
        ("SELECT a, n FROM ROWS FROM (s.g(), generate_series(1, 6)) AS r(a, n)", False),
        ("SELECT s.g() AS a, generate_series(1, 6) AS n", False),
    ],
)
def test_a_stored_body_whose_set_returning_call_follows_a_scan_is_counted(body: str, one_row: bool) -> None:
    assert _reason(body, one_row) is not None


@pytest.mark.parametrize(
    ("body", "one_row"),
    [
        ("SELECT lower($1)", True),
        ("SELECT max(id) FROM items", True),
        ("SELECT id FROM items ORDER BY id LIMIT 1", False),
        ("SELECT a, n FROM generate_series(1, 3) WITH ORDINALITY AS r(a, n)", False),
        ("SELECT a, n FROM unnest(ARRAY['x', 'y']) WITH ORDINALITY AS r(a, n)", False),
        ("SELECT id FROM customers ORDER BY id", False),  # a SETOF body ordered by the whole key
    ],
)
def test_a_stored_body_without_such_a_call_passes(body: str, one_row: bool) -> None:
    assert _reason(body, one_row) is None


# --- F9: per call -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a, n FROM s.g() WITH ORDINALITY AS r(a, n)",
        "SELECT a, n FROM ROWS FROM (s.g(), generate_series(1, 6)) AS r(a, n)",
        "SELECT a, n FROM ROWS FROM (generate_series(1, 6), s.g()) WITH ORDINALITY AS r(a, b, n)",
        "SELECT s.g() AS a, generate_series(1, 6) AS n",
        "SELECT unnest(ARRAY[1, 2]) * 0 + s.g() AS a",
        "SELECT c.id FROM customers AS c, LATERAL s.g() WITH ORDINALITY AS r(a, n)",
    ],
)
def test_numbering_a_user_functions_rows_is_refused(sql: str) -> None:
    with pytest.raises(MaskRefused, match="not numbered as they come out"):
        plan_masking(sql, "postgres", SCHEMA, POLICY)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a, n FROM generate_series(1, 6) WITH ORDINALITY AS r(a, n)",
        "SELECT a, n FROM unnest(ARRAY['x', 'y']) WITH ORDINALITY AS r(a, n)",
        "SELECT k, n FROM jsonb_each('{\"a\": 1}'::jsonb) WITH ORDINALITY AS r(k, v, n)",
        "SELECT c.id, n FROM customers AS c, generate_series(1, 2) WITH ORDINALITY AS r(a, n)",
    ],
)
def test_numbering_a_built_in_set_over_values_is_answered(sql: str) -> None:
    plan_masking(sql, "postgres", SCHEMA, POLICY)


def test_a_user_function_in_a_select_list_is_ordered_by_its_values() -> None:
    plan = plan_masking("SELECT s.g() AS a LIMIT 2", "postgres", SCHEMA, POLICY)
    assert plan.sql is not None and "ORDER BY 1" in plan.sql, plan


def test_a_user_function_is_left_alone_on_a_database_without_user_sets() -> None:
    plan_masking("SELECT f(1) AS a, g(2) AS b", "mysql", SCHEMA, POLICY)


# --- the repros, on PostgreSQL ------------------------------------------------------------------

ROWS = [(i, f"n{i}", f"{chr(122 - i)}@x.org") for i in range(1, 7)]  # id 6 has the smallest e-mail


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt27d_srf") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL);
            INSERT INTO customers VALUES {rows};
            CREATE INDEX customers_email_idx ON customers (email);
            CLUSTER customers USING customers_email_idx;
            ANALYZE customers;
            CREATE TABLE items (id int PRIMARY KEY, label text);
            INSERT INTO items VALUES (1, 'a'), (2, 'b');
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            GRANT SELECT ON items TO {db.reader};
            CREATE FUNCTION g() RETURNS SETOF int LANGUAGE sql STABLE AS 'SELECT id FROM public.customers';
            """
        )
        yield db


def _query(capsys: pytest.CaptureFixture[str], pg: PgScratch, tmp_path: Path, *args: str) -> tuple[int, str]:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - customers.email\n", encoding="utf-8")
    dsn = ("--dsn", pg.reader_url, "--mask", str(masks), "--allow", "function:public.g")
    return _run(capsys, "sql", "query", *dsn, *args)


@pytest.mark.postgres
def test_postgres_a_one_row_function_over_a_set_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute("CREATE FUNCTION f9() RETURNS int LANGUAGE sql STABLE AS 'SELECT public.g()'")
    code, out = _query(capsys, pg, tmp_path, "--allow", "function:public.f9", "SELECT public.f9() AS a")
    assert code == 2, out
    assert "function public.f9 may answer in the scan order of a masked table" in out, out
    assert "| 6 |" not in out


@pytest.mark.postgres
def test_postgres_a_view_multiplying_its_rows_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        "CREATE VIEW v_srf WITH (security_invoker = true) AS"
        " SELECT id, public.g() AS x FROM items ORDER BY id LIMIT 1"
    )
    pg.admin.execute(f"GRANT SELECT ON v_srf TO {pg.reader}")
    code, out = _query(capsys, pg, tmp_path, "SELECT * FROM v_srf")
    assert code == 2, out
    assert "view public.v_srf may answer in the scan order of a masked table" in out, out


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a, n FROM public.g() WITH ORDINALITY AS r(a, n)",
        "SELECT a, n FROM ROWS FROM (public.g(), generate_series(1, 6)) AS r(a, n)",
        "SELECT public.g() AS a, generate_series(1, 6) AS n",
    ],
)
def test_postgres_numbering_a_sets_rows_is_refused(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str
) -> None:
    code, out = _query(capsys, pg, tmp_path, sql)
    assert code != 0, out
    assert "not numbered as they come out" in out, out
    assert "| 6 | 1 |" not in out


@pytest.mark.postgres
def test_postgres_a_sets_rows_come_in_value_order(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opt_in = ("--allow", "function-order:public.g")  # a user function over a masked read: per-row
    code, out = _query(capsys, pg, tmp_path, *opt_in, "SELECT public.g() AS a LIMIT 3")
    assert code == 0, out
    assert [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()] == [
        "| 1 |",
        "| 2 |",
        "| 3 |",
    ], out


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql", "want"),
    [
        ("SELECT a, n FROM generate_series(10, 12) WITH ORDINALITY AS r(a, n)", "| 12 | 3 |"),
        ("SELECT a, n FROM unnest(ARRAY['x', 'y']) WITH ORDINALITY AS r(a, n)", "| y | 2 |"),
        ("SELECT public.g() AS a ORDER BY a", "| 6 |"),
    ],
)
def test_postgres_controls_are_answered(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str, want: str
) -> None:
    code, out = _query(capsys, pg, tmp_path, "--allow", "function-order:public.g", sql)  # g: per-row
    assert code == 0, out
    assert want in out, out
