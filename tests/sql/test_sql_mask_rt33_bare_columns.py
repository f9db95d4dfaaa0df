"""A DISTINCT or grouped block reads the first scanned row's values (red team rt33b F5, F6).

MariaDB sorts a DISTINCT block by ORDER BY keys it does not select, each taken from the first row
scanned for its distinct value; with a UNIQUE(email) index that row is the smallest e-mail, so
`SELECT DISTINCT (id IN (2, 5)) AS g ... ORDER BY CASE id WHEN 2 THEN 1 WHEN 5 THEN 3 ELSE 2 END`
answered `g = 1` first exactly when email(2) < email(5): the whole e-mail ranking in ten calls,
agent alone, no opt-in (F6; `GROUP_CONCAT(DISTINCT ...)` / `JSON_ARRAYAGG(DISTINCT ...)` with an
ORDER BY of their own the same). Its ONLY_FULL_GROUP_BY misses a bare column in a window or the
ORDER BY of a grouped block, so a view `MAX(id) OVER (PARTITION BY city) ... GROUP BY city` passed
start-up and answered the id of the smallest e-mail per city (F5). Now each counts as a masked
order: refused per call, a start-up finding (opt-in `view-order:`) for a stored view.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.masking import KnownSchema, MaskPolicy, MaskRefused, plan_masking
from mcpkit.sql.masking.view_order import order_reason
from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch, pg_customers, pg_scratch
from tests.sql.sql_support import run_cli as _run

# id order differs from e-mail order; the per-city smallest e-mails are ids 2 (Oslo) and 4 (Rome)
ROWS = "(1,'Ann','zed@x.org','Oslo'),(2,'Bob','alice@x.org','Oslo'),(3,'Cid','mike@x.org','Rome'),"
ROWS += "(4,'Dee','bob@x.org','Rome'),(5,'Eve','yann@x.org','Oslo'),(6,'Fay','carl@x.org','Rome')"
CASE = "CASE id WHEN 2 THEN 1 WHEN 5 THEN 3 ELSE 2 END"
F6 = {
    "distinct": "SELECT DISTINCT (id IN (2, 5)) AS g FROM customers WHERE id + 0 IN (2, 5, 1)"
    f" ORDER BY {CASE}",
    "group_concat": f"SELECT GROUP_CONCAT(DISTINCT (id IN (2, 5)) ORDER BY {CASE}) AS s"
    " FROM customers WHERE id + 0 IN (2, 5, 1)",
    "json_arrayagg": f"SELECT JSON_ARRAYAGG(DISTINCT (id IN (2, 5)) ORDER BY {CASE}) AS s"
    " FROM customers WHERE id + 0 IN (2, 5, 1)",
    "distinct_city": "SELECT DISTINCT city FROM customers ORDER BY id",
}
F5 = {  # the stored views' shapes as the agent's own query
    "window_argument": "SELECT city, COUNT(*) AS n, MAX(id) OVER (PARTITION BY city) AS first_id"
    " FROM customers GROUP BY city",
    "order_by": "SELECT city, COUNT(*) AS n FROM customers GROUP BY city ORDER BY id LIMIT 1",
    # a named window's ORDER BY: MariaDB ranked the cities by their first scanned id (before: served)
    "named_window": "SELECT city, COUNT(*) AS n, RANK() OVER w AS r FROM customers GROUP BY city"
    " WINDOW w AS (ORDER BY id)",
}
VIEWS = {
    "v_city_first": F5["window_argument"],
    "v_city_top": F5["order_by"],
    "v_city_rank": F5["named_window"],
    "v_dist": F6["distinct_city"],
}
# Analytical queries that must still be served over the masked table, with their answers.
LEGIT = {
    "SELECT DISTINCT city FROM customers ORDER BY city DESC": "| Rome |\n| Oslo |",
    "SELECT DISTINCT city AS c, name FROM customers ORDER BY c, 2": "| Oslo | Ann |\n| Oslo | Bob |",
    "SELECT DISTINCT city FROM customers ORDER BY LENGTH(city), city": "| Oslo |\n| Rome |",
    "SELECT city, COUNT(*) AS n FROM customers WHERE id < 6 GROUP BY city ORDER BY COUNT(*) DESC":
        "| Oslo | 3 |",
    "SELECT city, RANK() OVER (ORDER BY COUNT(*)) AS r FROM customers WHERE id < 6 GROUP BY city":
        "| Rome | 1 |",
    "SELECT GROUP_CONCAT(DISTINCT city ORDER BY city DESC) AS s FROM customers": "| Rome,Oslo |",
    "SELECT JSON_ARRAYAGG(DISTINCT city) AS s FROM customers": '| ["Oslo","Rome"] |',
    "SELECT id, name, COUNT(*) AS n FROM customers GROUP BY id, name ORDER BY id LIMIT 1": "| 1 | Ann | 1 |",
}  # fmt: skip


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt33b_bare") as db:
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, name varchar(20) NOT NULL,"
                " email varchar(80) NOT NULL, city varchar(20) NOT NULL,"
                " UNIQUE KEY email_uq (email), KEY cov (email, city))"
            )
            c.execute(f"INSERT INTO {db.db}.customers VALUES {ROWS}")
            c.execute(f"GRANT SELECT (id, name, city) ON {db.db}.customers TO '{db.reader}'@'%'")
        yield db


def _admin(my: MysqlScratch, sql: str) -> list[tuple[object, ...]]:
    with my.admin.cursor() as c:
        c.execute(f"USE {my.db}")
        c.execute(sql)
        return list(c.fetchall())


@pytest.mark.mysql
def test_mariadb_distinct_ordered_by_an_unselected_value_is_refused(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # what the red team read: alice (id 2) < yann (id 5), so g = 1 comes first
    assert _admin(my, F6["distinct"] + ", 1 LIMIT 26") == [(1,), (0,)]
    assert _admin(my, F6["group_concat"]) == [("1,0",)]
    masks = masks_file(tmp_path, "customers.email")
    for name, sql in F6.items():
        code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, sql)
        assert code != 0, (name, out)  # before: | 1 | 0 | (`, 1 LIMIT 26` appended)
        aggregate = name in ("group_concat", "json_arrayagg")
        wanted = "with DISTINCT may order only" if aggregate else "a DISTINCT query may order only by"
        assert wanted in out, (name, out)
        assert "x.org" not in out


@pytest.mark.mysql
def test_mariadb_bare_columns_of_a_grouped_query_are_refused(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _admin(my, F5["window_argument"]) == [("Oslo", 3, 2), ("Rome", 3, 4)]  # the smallest e-mails
    masks = masks_file(tmp_path, "customers.email")
    for name, sql in F5.items():
        code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, sql)
        assert code != 0, (name, out)
        assert "every selected column of a grouped query must be grouped or aggregated" in out, (name, out)


@pytest.mark.mysql
def test_mariadb_a_view_reading_a_first_scanned_row_refuses_start_up(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = {
        **VIEWS,
        "v_ok": "SELECT city, COUNT(*) AS n FROM customers GROUP BY city ORDER BY COUNT(*), city",
    }
    for name, sql in views.items():
        _admin(my, f"CREATE SQL SECURITY INVOKER VIEW {name} AS {sql}")
        _admin(my, f"GRANT SELECT, SHOW VIEW ON {my.db}.{name} TO '{my.reader}'@'%'")
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, "SELECT * FROM v_ok")
    assert code == 2, out  # before: served, | Oslo | 3 | 2 | through v_city_first
    for name in VIEWS:
        assert f"view {my.db}.{name} may answer in the scan order of a masked table" in out, (name, out)
        assert f"--allow view-order:{my.db}.{name}" in out
    assert "bare column" in out and "DISTINCT block ordered by" in out
    assert f"{my.db}.v_ok " not in out, out
    allow = [a for name in VIEWS for a in ("--allow", f"view-order:{my.db}.{name}")]
    sql = "SELECT city, n, first_id FROM v_city_first ORDER BY city"
    code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, *allow, sql)
    assert code == 0, out  # the operator accepted it
    assert "| Oslo | 3 | 2 |" in out


@pytest.mark.mysql
def test_mariadb_a_first_scanned_finding_prints_the_fix_its_reason_needs(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ORDER BY on the primary key does not fix a bare column or a DISTINCT's order (rt33 F3)."""
    views = {**VIEWS, "v_first": "SELECT id, name FROM customers LIMIT 1"}
    for name, sql in views.items():
        _admin(my, f"CREATE SQL SECURITY INVOKER VIEW {name} AS {sql}")
        _admin(my, f"GRANT SELECT, SHOW VIEW ON {my.db}.{name} TO '{my.reader}'@'%'")
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, "SELECT 1")
    assert code == 2, out
    lines = {name: [ln for ln in out.splitlines() if f"{my.db}.{name} may answer" in ln] for name in views}
    generic = "give its LIMIT, window or aggregate an ORDER BY on the primary key"
    for name in ("v_city_first", "v_city_top", "v_city_rank"):
        (line,) = lines[name]
        assert "bare column" in line and "group by that column too or aggregate it" in line, line
        assert "GROUP BY g ORDER BY MIN(k)" in line and generic not in line, line
        assert f"REVOKE SELECT ON `{my.db}`.`{name}`" in line, line
    (line,) = lines["v_dist"]
    assert "DISTINCT block ordered by" in line and "order its DISTINCT only by what it selects" in line, line
    assert generic not in line, line
    (line,) = lines["v_first"]  # a LIMIT in scan order: the key is the fix
    assert generic in line, line


@pytest.mark.mysql
def test_mariadb_analytical_queries_over_the_masked_table_still_pass(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    masks = masks_file(tmp_path, "customers.email")
    for sql, wanted in LEGIT.items():
        code, out = _run(capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, sql)
        assert code == 0, (sql, out)
        assert wanted in out, (sql, out)


@pytest.mark.postgres
def test_postgres_refuses_these_shapes_itself(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with pg_scratch(pg_url, "rt33b_bare") as db:
        pg_customers(db)
        masks = masks_file(tmp_path, "customers.email")
        for sql in (
            f"SELECT DISTINCT (id IN (2, 5)) AS g FROM customers ORDER BY {CASE}",
            f"SELECT string_agg(DISTINCT (id IN (2, 5))::text, ',' ORDER BY {CASE}) AS s FROM customers",
            "SELECT name, count(*) AS n, max(id) OVER (PARTITION BY name) AS m FROM customers GROUP BY name"
            " ORDER BY id",
        ):
            caplog.clear()
            code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
            assert code != 0, (sql, out)
            assert out.startswith("TOOL_ERROR: The database"), out
            logged = caplog.text
            assert "ORDER BY expressions must appear" in logged or "must appear in the GROUP BY" in logged, (
                logged
            )


# --- parse level: SQLite also takes a DISTINCT block's ORDER BY from an arbitrary row ----------

KNOWN = KnownSchema({"customers": {"id": "INT", "email": "TEXT", "city": "TEXT"}}, "sqlite")
POLICY = MaskPolicy.of(["customers.email"])


def test_sqlite_distinct_ordered_by_an_unselected_column_is_refused() -> None:
    with pytest.raises(MaskRefused, match="DISTINCT query may order only"):
        plan_masking("SELECT DISTINCT city FROM customers ORDER BY id", "sqlite", KNOWN, POLICY)
    plan = plan_masking("SELECT DISTINCT city AS c FROM customers ORDER BY c DESC", "sqlite", KNOWN, POLICY)
    assert plan.sql is not None and "ORDER BY" in plan.sql


# --- parse level: stored SQL (MariaDB's stored view text qualifies every column) ----------------

STORED_KNOWN = KnownSchema({"customers": {"id": "INT", "email": "TEXT", "city": "TEXT"}}, "mysql")


def _stored(sql: str) -> str | None:
    return order_reason(sql, "mysql", STORED_KNOWN, POLICY, lambda schema, table: [frozenset({"id"})])


@pytest.mark.parametrize(
    "sql",
    [
        "select `d`.`customers`.`city` AS `city`,max(`d`.`customers`.`id`) over ( partition by"
        " `d`.`customers`.`city`) AS `m` from `d`.`customers` group by `d`.`customers`.`city`",
        "select `d`.`customers`.`city` AS `city` from `d`.`customers` group by `d`.`customers`.`city`"
        " having `d`.`customers`.`id` > 2",
        "select distinct `d`.`customers`.`city` AS `city` from `d`.`customers` order by `d`.`customers`.`id`",
        "select group_concat(distinct `d`.`customers`.`city` order by `d`.`customers`.`id` ASC separator ',')"
        " AS `s` from `d`.`customers`",
        "SELECT city, id FROM customers GROUP BY city",  # a hand-written (SQLite-style) body
    ],
)
def test_stored_first_scanned_reads_count(sql: str) -> None:
    found = _stored(sql)
    assert found is not None and ("bare column" in found or "DISTINCT" in found), found


@pytest.mark.parametrize(
    "sql",
    [
        "select `d`.`customers`.`city` AS `city`,count(0) AS `n`,rank() over ( order by count(0)) AS `r`"
        " from `d`.`customers` group by `d`.`customers`.`city` order by count(0),`d`.`customers`.`city`",
        "select `d`.`customers`.`city` AS `c`,count(0) AS `n` from `d`.`customers` group by 1 order by `c`",
        "select distinct `d`.`customers`.`city` AS `city` from `d`.`customers`"
        " order by length(`d`.`customers`.`city`),`city`",
    ],
)
def test_stored_grouped_and_distinct_blocks_over_their_keys_pass(sql: str) -> None:
    assert _stored(sql) is None
