"""A qualifier names every FROM item of its name in the statement (red team rt27 F1).

sqlglot lets a non-LATERAL derived table, a CTE body and a JOIN's ON see their sibling FROM items;
PostgreSQL does not and takes the outer query's `q` instead, so `q.pg_column_size` was checked
against the sibling `(SELECT 1 AS pg_column_size) q` and ran pg_column_size(q) on the outer row
(30). Now `q.name` passes only when `name` is a column of every FROM item named `q`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import pytest
import sqlglot

from mcpkit.sql.admission.limit_expansion import RelationRef
from mcpkit.sql.admission.reject_attribute_calls import reject_attribute_calls
from mcpkit.sql.errors import Refused
from tests.sql.sql_support import PgScratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

# Each ran the function on PostgreSQL 15 before (30 = pg_column_size of an items row, `(1,a)` =
# record_out, `rt27a ran` = rt27a_f, or a division by zero), except where noted.
REFUSED = [
    "SELECT (SELECT d.v FROM (SELECT q.pg_column_size AS v) d, (SELECT 1 AS pg_column_size) q)"
    " AS r FROM items q",
    "SELECT (WITH d AS (SELECT q.pg_column_size AS v) SELECT d.v FROM d, (SELECT 1 AS"
    " pg_column_size) q) AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.record_out AS v) d, (SELECT 'x' AS record_out) q) AS r FROM items q",
    "SELECT (SELECT count(*) FROM items a JOIN items b ON q.pg_column_size = 30, (SELECT 1 AS"
    " pg_column_size) q) AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q) AS r FROM items q",
    "SELECT id FROM items q WHERE (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS"
    " rt27a_f) q) = 'rt27a ran'",
    "SELECT q.id FROM items q GROUP BY q.id HAVING (SELECT d.v FROM (SELECT q.rt27a_f AS v) d,"
    " (SELECT 'x' AS rt27a_f) q) = 'rt27a ran'",
    "SELECT id FROM items q ORDER BY 1 / ((SELECT d.v FROM (SELECT q.pg_column_size AS v) d,"
    " (SELECT 1 AS pg_column_size) q) - 30)",
    "SELECT (SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q) FROM"
    " (SELECT 2 AS z) z) AS r FROM items q",
    "WITH q AS (SELECT 'x' AS rt27a_f) SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, q) AS"
    " r FROM items q",
    "WITH items AS (SELECT items.rt27a_f AS rt27a_f FROM items) SELECT * FROM items",
    "SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d JOIN (SELECT 'x' AS rt27a_f, 'rt27a ran'"
    " AS v) q USING (v)) AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d NATURAL JOIN (SELECT 'x' AS rt27a_f,"
    " 'rt27a ran' AS v) q) AS r FROM items q",
    "SELECT (SELECT j.v FROM ((SELECT q.rt27a_f AS v) d CROSS JOIN (SELECT 'x' AS rt27a_f) q) j)"
    " AS r FROM items q",
    "SELECT (SELECT q.rt27a_f FROM ((SELECT 'x' AS rt27a_f) q CROSS JOIN (SELECT 1 AS z) z) j)"
    " AS r FROM items q",
    "SELECT (SELECT max(v) FROM (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS"
    " rt27a_f) q UNION ALL SELECT 'a') u) AS r FROM items q",
    "SELECT (SELECT max(d.v) FROM (SELECT 'x' AS rt27a_f) q, (SELECT 'a' AS v UNION ALL SELECT"
    " q.rt27a_f) d) AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (VALUES ('x')) q(rt27a_f)) AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.pg_column_size AS v) d, generate_series(1, 1)"
    " q(pg_column_size)) AS r FROM items q",
    "SELECT id FROM items q WHERE EXISTS (SELECT 1 FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x'"
    " AS rt27a_f) q WHERE d.v = 'rt27a ran')",
    "SELECT (SELECT d.v FROM (SELECT 1 AS z) z JOIN (SELECT q.rt27a_f AS v) d ON true, (SELECT"
    " 'x' AS rt27a_f) q) AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q) AS r FROM"
    " (SELECT * FROM items) q",
    "SELECT (WITH w AS (SELECT 'x' AS rt27a_f) SELECT d.v FROM (SELECT q.rt27a_f AS v) d, w q)"
    " AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT Q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q) AS r FROM items \"q\"",
    "SELECT generate_series.pg_column_size FROM generate_series(1, 2), unnest(ARRAY[1])",  # crashed
    "SELECT g FROM items q, generate_series(1, (SELECT length(d.v) FROM (SELECT q.rt27a_f AS v) d,"
    " (SELECT 'x' AS rt27a_f) q)) g",  # 1..9: length('rt27a ran')
    "SELECT ARRAY(SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q) AS r FROM items q",
    "SELECT count(*) FILTER (WHERE (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q)"
    " = 'rt27a ran') AS r FROM items q",
    "SELECT DISTINCT ON ((SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q)) q.id"
    " FROM items q",
    "SELECT CASE WHEN true THEN (SELECT d.v FROM (SELECT q.rt27a_f AS v) d, (SELECT 'x' AS rt27a_f) q)"
    " END AS r FROM items q",
    "SELECT (SELECT d.v FROM (SELECT q.rt27a_f AS v FROM (SELECT 1 AS z) z) d, (SELECT 'x' AS rt27a_f) q)"
    " AS r FROM items q",
    "SELECT id FROM items q LIMIT (SELECT length(d.v) FROM (SELECT q.rt27a_f AS v) d,"
    " (SELECT 'x' AS rt27a_f) q)",  # a database error before
]

PASSED = [
    ("SELECT (SELECT c.name FROM items c WHERE c.id = q.id) AS n FROM items q ORDER BY 1", "| a "),
    ("SELECT (SELECT d.v FROM (SELECT q.name AS v) d, (SELECT 1 AS name) q) AS r FROM items q", "| a "),
    ("SELECT q.id FROM items q WHERE EXISTS (SELECT 1 FROM items r WHERE r.id = q.id) ORDER BY 1", "| 1 "),
    (
        "WITH c AS (SELECT id, name FROM items) SELECT c.name FROM c JOIN items i USING (id) ORDER BY 1",
        "| a ",
    ),
    ("SELECT x.name FROM items x JOIN items y ON x.id = y.id ORDER BY 1", "| a "),
]


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt27a") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
            INSERT INTO items VALUES (1, 'a'), (2, 'b');
            CREATE FUNCTION rt27a_f(i items) RETURNS text STABLE LANGUAGE sql
              BEGIN ATOMIC SELECT 'rt27a ran'; END;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT ON items TO {db.reader};
            """
        )
        yield db


@pytest.mark.postgres
@pytest.mark.parametrize("sql", REFUSED)
def test_postgres_a_qualifier_postgres_reads_elsewhere_is_refused(
    pg: PgScratch, capsys: pytest.CaptureFixture[str], sql: str
) -> None:
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--allow", "unbounded-memory", sql)
    assert code != 0 and "Attribute notation" in out, (sql, out)
    assert "rt27a ran" not in out and "30" not in out and "(1,a)" not in out, out


@pytest.mark.postgres
def test_postgres_qualified_columns_of_every_item_so_named_pass(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    for sql, want in PASSED:
        code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--allow", "unbounded-memory", sql)
        assert code == 0 and want in out, (sql, out)


class _Columns:
    def relation_columns(self, refs: Collection[RelationRef]) -> dict[RelationRef, frozenset[str] | None]:
        known: dict[RelationRef, frozenset[str]] = {(None, "items"): frozenset({"id", "name", "ctid"})}
        return {r: known.get(r) for r in refs}

    def function_columns(self, ref: RelationRef) -> tuple[frozenset[str], bool]:
        return (frozenset(), ref == (None, "generate_series"))


@pytest.mark.parametrize("sql", REFUSED)
def test_a_qualifier_is_checked_against_every_item_of_its_name(sql: str) -> None:
    with pytest.raises(Refused) as caught:
        reject_attribute_calls(sqlglot.parse_one(sql, read="postgres"), "postgres", catalog=_Columns())
    assert (caught.value.data or {}).get("reason") == "attribute_call"


@pytest.mark.parametrize("sql", [sql for sql, _ in PASSED])
def test_a_column_of_every_item_so_named_passes(sql: str) -> None:
    reject_attribute_calls(sqlglot.parse_one(sql, read="postgres"), "postgres", catalog=_Columns())
