"""A CTE named like the masked table is not the table (red team rt25 F2).

The stored-body order check resolved `FROM customers` to the catalog's table even where the body's
own `WITH customers AS (SELECT id AS real, 1 AS id FROM public.customers)` defines the name, so
`ORDER BY id` (the CTE's constant) counted as the table's primary key: a PostgreSQL view with
`string_agg(real::text, ',' ORDER BY id)`, a MariaDB view with `group_concat(real ORDER BY id)` and
a one-row SQL function (`WHERE id = 1`, "pinned") answered the ids in e-mail order, with no opt-in.
Now a name some WITH around it defines is never the catalog's table: a block over it has no known
key, so its order counts as unverifiable; a block over the real table keeps its key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.masking import KnownSchema, MaskPolicy, MaskRefused, plan_masking
from mcpkit.sql.masking.view_order import order_reason
from tests.sql.sql_support import (
    CUSTOMERS_SECRET,
    MysqlScratch,
    PgScratch,
    masks_file,
    mysql_customers,
    mysql_scratch,
    pg_customers,
    pg_scratch,
)
from tests.sql.sql_support import run_cli as _run

SECRET = CUSTOMERS_SECRET
# The ids of `sql_support.CUSTOMERS_ROWS` in e-mail order.
RANKING = "4,1,5,2,3"

PG_VIEW = (
    "WITH customers AS (SELECT id AS real, 1 AS id FROM public.customers)"
    " SELECT string_agg(real::text, ',' ORDER BY id) AS r FROM customers"
)
# The CTE renamed (it shadows nothing) and the aggregate over the real table, ordered by its key.
PG_VIEW_OK = (
    "WITH picked AS (SELECT id AS real, 1 AS id FROM public.customers)"
    " SELECT string_agg(c.id::text, ',' ORDER BY c.id) AS r FROM public.customers c"
    " WHERE c.id IN (SELECT real FROM picked)"
)
PG_FUNCTION = (
    "CREATE FUNCTION rt25_walk(ex int[]) RETURNS int LANGUAGE sql STABLE AS $$"
    " WITH customers AS (SELECT 1 AS id, c.id AS real FROM public.customers c)"
    " SELECT real FROM customers WHERE id = 1 AND NOT (real = ANY(ex)) $$"
)
PG_FUNCTION_OK = (
    "CREATE FUNCTION rt25_one(k int) RETURNS text LANGUAGE sql STABLE AS $$"
    " WITH picked AS (SELECT 1 AS id, c.id AS real FROM public.customers c)"
    " SELECT c.name FROM public.customers c WHERE c.id = k AND c.id IN (SELECT real FROM picked) $$"
)


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt25b_cte") as db:
        pg_customers(db, unique=False)
        yield db


@pytest.mark.postgres
def test_postgres_a_view_over_a_cte_named_like_the_masked_table_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, sql in (("v_cte", PG_VIEW), ("v_cte_ok", PG_VIEW_OK)):
        pg.admin.execute(f"CREATE VIEW {name} WITH (security_invoker = true) AS {sql}")
        pg.admin.execute(f"GRANT SELECT ON {name} TO {pg.reader}")
    # what the red team read: the ids in e-mail order, through a query naming only the view
    assert pg.admin.execute("SELECT r FROM v_cte").fetchone()[0] == RANKING
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, "SELECT r FROM v_cte")
    assert code == 2, out  # before: | 4,1,5,2,3 |
    assert RANKING not in out and SECRET not in out
    assert "view public.v_cte may answer in the scan order of a masked table: aggregate" in out, out
    assert "--allow view-order:public.v_cte" in out
    assert "public.v_cte_ok " not in out, out  # the real table ordered by its key: no finding
    allow = ["--allow", "view-order:public.v_cte"]
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow, "SELECT r FROM v_cte_ok"
    )
    assert code == 0, out
    assert "1,2,3,4,5" in out


@pytest.mark.postgres
def test_postgres_a_one_row_function_over_a_cte_named_like_the_masked_table_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(PG_FUNCTION)
    pg.admin.execute(PG_FUNCTION_OK)
    # each call keeps the first row the scan meets: the next id in e-mail order
    walked = [
        pg.admin.execute("SELECT rt25_walk(%s::int[])", (RANKING.split(",")[:k],)).fetchone()[0]
        for k in range(2)
    ]
    assert walked == [4, 1]
    masks = masks_file(tmp_path, "customers.email")
    allow = [a for f in ("rt25_walk", "rt25_one") for a in ("--allow", f"function:public.{f}")]
    sql = "SELECT public.rt25_walk(ARRAY[]::int[]) AS a, public.rt25_one(2) AS b"
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow, sql)
    assert code == 2, out  # before: | 4 | Bob |
    assert "function public.rt25_walk may answer in the scan order of a masked table: LIMIT" in out, out
    assert "--allow function-order:public.rt25_walk" in out
    assert "function public.rt25_one may answer" not in out, out
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow,
        "--allow", "function-order:public.rt25_walk", "--allow", "function-order:public.rt25_one",
        "SELECT public.rt25_one(2) AS b",  # rt25_one: a user function over a masked read is per-row
    )  # fmt: skip
    assert code == 0, out
    assert "| Bob |" in out


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt25b_cte") as db:
        mysql_customers(db, "KEY by_email (email)")
        yield db


@pytest.mark.mysql
def test_mariadb_a_view_over_a_cte_named_like_the_masked_table_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = {
        "v_cte": f"WITH customers AS (SELECT id AS `real`, 1 AS id FROM {my.db}.customers)"
        " SELECT group_concat(`real` ORDER BY id) AS r FROM customers",
        "v_cte_ok": f"WITH picked AS (SELECT id AS `real`, 1 AS id FROM {my.db}.customers)"
        f" SELECT group_concat(c.id ORDER BY c.id) AS r FROM {my.db}.customers c"
        " WHERE c.id IN (SELECT `real` FROM picked)",
    }
    with my.admin.cursor() as c:
        for name, sql in views.items():
            c.execute(f"CREATE SQL SECURITY INVOKER VIEW {my.db}.{name} AS {sql}")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.{name} TO '{my.reader}'@'%'")
        c.execute(f"SELECT r FROM {my.db}.v_cte")
        seen = c.fetchone()[0]
    # what the old check served: the ids in the scan order of the e-mail index (here descending)
    assert seen in (RANKING, RANKING[::-1]), seen
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, "SELECT r FROM v_cte")
    assert code == 2, out  # before: | 3,2,5,1,4 |
    assert SECRET not in out and seen not in out
    assert f"view {my.db}.v_cte may answer in the scan order of a masked table: aggregate" in out, out
    assert f"{my.db}.v_cte_ok " not in out, out
    allow = ["--allow", f"view-order:{my.db}.v_cte"]
    code, out = _run(
        capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, *allow, "SELECT r FROM v_cte_ok"
    )
    assert code == 0, out
    assert "1,2,3,4,5" in out


# --- parse level ------------------------------------------------------------------------------

KNOWN = KnownSchema({"customers": {"id": "INT", "email": "TEXT", "name": "TEXT"}}, "postgres")
POLICY = MaskPolicy.of(["customers.email"])


def _pk(schema: str | None, table: str) -> list[frozenset[str]]:
    return [frozenset({"id"})] if table.casefold() == "customers" else []


def _reason(sql: str, dialect: str = "postgres", one_row: bool = False) -> str | None:
    return order_reason(sql, dialect, KNOWN, POLICY, _pk, frozenset({"ex", "k"}), one_row=one_row)


SHADOWED = {  # each reads a name a WITH around it defines: no known key, so unverifiable
    "view": PG_VIEW,
    "mariadb": "WITH customers AS (SELECT id AS `real`, 1 AS id FROM customers)"
    " SELECT group_concat(`real` ORDER BY id) AS r FROM customers",
    "nested": "WITH a AS (SELECT 1 AS z) SELECT (WITH customers AS (SELECT id AS real, 1 AS id"
    " FROM public.customers) SELECT string_agg(real::text, ',' ORDER BY id) FROM customers) AS r FROM a",
    "outer_with": "WITH customers AS (SELECT id AS real, 1 AS id FROM public.customers)"
    " SELECT (SELECT string_agg(real::text, ',' ORDER BY id) FROM customers) AS r",
    "inner_shadows_outer": "WITH customers AS (SELECT id, name FROM public.customers)"
    " SELECT * FROM (WITH customers AS (SELECT id AS real, 1 AS id FROM public.customers)"
    " SELECT real FROM customers ORDER BY id LIMIT 1) t",
    "recursive": "WITH RECURSIVE customers(real, id) AS (SELECT id, 1 FROM public.customers"
    " UNION ALL SELECT real, id FROM customers WHERE false) SELECT real FROM customers ORDER BY id LIMIT 1",
    "later_sibling": "WITH a AS (SELECT real FROM customers ORDER BY id LIMIT 1),"
    " customers AS (SELECT id AS real, 1 AS id FROM public.customers) SELECT * FROM a",
    "case": "WITH Customers AS (SELECT id AS real, 1 AS id FROM public.customers)"
    " SELECT real FROM CUSTOMERS ORDER BY id LIMIT 1",
    "derived": "SELECT string_agg(real::text, ',' ORDER BY id) FROM"
    " (SELECT id AS real, 1 AS id FROM public.customers) AS customers",
    "column_list": "SELECT string_agg(name, ',' ORDER BY id) FROM customers AS c(email, id)",
    "outer_row": "SELECT (SELECT string_agg(c2.name, ',' ORDER BY customers.id) FROM customers c2) AS r"
    " FROM customers WHERE id = 1",
    "window_alias": "SELECT id AS name, row_number() OVER (ORDER BY name) AS rn FROM customers",
}


@pytest.mark.parametrize("name", list(SHADOWED))
def test_a_name_a_with_defines_is_not_the_catalog_table(name: str) -> None:
    dialect = "mysql" if name == "mariadb" else "postgres"
    assert _reason(SHADOWED[name], dialect) is not None


def test_a_one_row_function_over_a_shadowing_cte_keeps_the_first_row() -> None:
    body = PG_FUNCTION.split("$$")[1]
    assert _reason(body, one_row=True) == "LIMIT, OFFSET or FETCH without an ORDER BY on a whole primary key"
    pinned = "SELECT c.name FROM public.customers c WHERE c.id = k"
    assert _reason(pinned, one_row=True) is None  # the real table's key, pinned: one row
    assert _reason("SELECT c.name FROM customers c WHERE customers.id = k", one_row=True) is not None


@pytest.mark.parametrize(
    "sql",
    [
        PG_VIEW_OK,
        # a qualified name is never a CTE's, whatever the WITH defines
        "WITH customers AS (SELECT 1 AS id) SELECT string_agg(c.name, ',' ORDER BY c.id) AS r"
        " FROM public.customers c",
        # a CTE of a sibling subquery does not reach this block
        "SELECT (WITH customers AS (SELECT 1 AS id) SELECT count(*) FROM customers) AS n,"
        " (SELECT string_agg(name, ',' ORDER BY id) FROM customers) AS r",
        "SELECT id AS id, row_number() OVER (ORDER BY id) AS rn FROM customers",
    ],
)
def test_the_real_table_ordered_by_its_key_passes(sql: str) -> None:
    assert _reason(sql) is None


def test_mariadb_stored_text_names_columns_by_database_and_table() -> None:
    # how MariaDB stores a view: every column `db`.`table`.`column`
    ok = "select group_concat(`d`.`customers`.`name` order by `d`.`customers`.`id` ASC separator ',') AS `r`"
    assert _reason(f"{ok} from `d`.`customers`", "mysql") is None
    assert _reason(f"{ok} from `e`.`customers`", "mysql") is not None  # another database's row
    assert _reason(f"{ok} from `d`.`customers` `c`", "mysql") is not None  # aliased: not this table


def test_the_per_call_analysis_scopes_a_shadowing_cte() -> None:
    # a call runs through sqlglot's scopes: the CTE's outputs, the masked e-mail renamed included
    schema = {"customers": {"id": "INT", "email": "TEXT", "name": "TEXT"}}
    for dialect in ("postgres", "mysql"):
        with pytest.raises(MaskRefused):
            plan_masking(
                "WITH customers AS (SELECT email AS id FROM customers) SELECT id FROM customers ORDER BY id",
                dialect, schema, POLICY,
            )  # fmt: skip
        plan = plan_masking(
            "WITH customers AS (SELECT id AS real, 1 AS id FROM customers)"
            " SELECT real FROM customers LIMIT 1",
            dialect, schema, POLICY,
        )  # fmt: skip
        assert "ORDER BY 1" in plan.sql  # pinned by the visible value, not by the constant
