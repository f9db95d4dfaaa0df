"""Attribute notation over a source whose columns PostgreSQL names itself (red team rt25 F1).

`q.name` where `name` is no column of `q` calls `name(q)`. Made-up output names (`count`,
`?column?`), set operations, VALUES, `SELECT *` over a function, LATERAL subqueries and CTEs left
q's columns unknown, and unknown passed: `SELECT q.pg_column_size FROM (SELECT count(*) FROM
customers) q` answered 32. Unknown now refuses; the names PostgreSQL gives are worked out as it does.
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

REFUSED = [
    "SELECT q.pg_column_size FROM (SELECT count(*) FROM customers) q",
    "SELECT q.record_out FROM (SELECT count(*) FROM customers) q",
    "WITH c AS (SELECT count(*) FROM customers) SELECT c.record_out FROM c",
    "SELECT c.record_out FROM customers x, LATERAL (SELECT x.id+1) c",
    "SELECT q.rt25_cf FROM (SELECT id,email,name FROM customers UNION ALL SELECT 1,'a','b') q",
    "SELECT q.rt25_cf FROM (SELECT * FROM customers UNION ALL SELECT 1,'a','b') q",
    "SELECT v.record_out FROM (VALUES (1, 2)) v",
    "SELECT q.record_out FROM (SELECT * FROM generate_series(1, 2)) q",
    "SELECT q.record_out FROM (SELECT * FROM unnest(ARRAY[1])) q",
    "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3)"
    " SELECT r.record_out FROM r",
    "WITH c(a) AS (SELECT 1, 2) SELECT c.record_out FROM c",
    "SELECT q.id FROM (SELECT id, email FROM customers) q(a)",  # renamed: `q.id` calls id(q)
    "SELECT q.record_out FROM (SELECT 1 + 1) q",  # `?column?`
    "SELECT q.record_out FROM (SELECT char_length('a')) q",  # named char_length; not sure here
    "SELECT q.record_out FROM (SELECT now()) q",
    "SELECT q.record_out FROM (SELECT trim(' a')) q",  # PostgreSQL names it btrim
    "SELECT q.record_out FROM (SELECT CASE WHEN true THEN 1 END) q",
    "SELECT q.record_out FROM (SELECT 1 AS a UNION SELECT 2 AS record_out) q",  # the left branch names
    "SELECT u.record_out FROM unnest(ARRAY[1]) u",
    "SELECT r.record_out FROM ROWS FROM (generate_series(1, 2)) r",
    "SELECT (q).record_out FROM (SELECT 1 AS a) q",
    "WITH c AS (SELECT 1 AS record_out) SELECT x.record_out FROM c x(a)",  # the list renames it
    "SELECT q.record_out FROM (WITH c AS (SELECT 1 AS record_out) SELECT * FROM c x(a)) q",
    'SELECT "Q".record_out FROM (SELECT 1 AS record_out) q, (SELECT count(*)) "Q"',  # "Q" is not q
    'SELECT (SELECT "Q".record_out FROM (SELECT 1 AS record_out) q) FROM (SELECT count(*)) "Q"',
    "SELECT j.record_out FROM ((SELECT 1 AS id) a JOIN (SELECT 1 AS id, 2 AS z) b USING (id)) j",
    "SELECT q.ctid FROM (SELECT * FROM customers) q",  # `*` leaves the system columns out
    """SELECT jsonb_each.record_out FROM jsonb_each('{"a": 1}')""",  # named after the function
]

PASSED = [
    ("SELECT q.count FROM (SELECT count(*) FROM customers) q", "| 3 "),
    ('SELECT q."?column?" FROM (SELECT 40 + 2) q', "| 42 "),
    (
        "SELECT q.upper, q.int4, q.email FROM (SELECT upper('a'), '1'::integer, email FROM customers) q",
        "| A ",
    ),
    ("SELECT q.case, q.x FROM (SELECT CASE WHEN true THEN 1 END, CASE WHEN true THEN 2 ELSE id END AS x"
     " FROM customers) q", "| 1 "),
    (
        "SELECT q.date_trunc, q.extract FROM (SELECT date_trunc('day', now()), extract(year FROM now())) q",
        "| 20",
    ),
    (
        "SELECT q.id FROM (SELECT id, email FROM customers UNION SELECT 9, 'z') q ORDER BY 1 DESC LIMIT 1",
        "| 9 ",
    ),
    ("SELECT v.column1, v.column2 FROM (VALUES (7, 'a')) v", "| 7 "),
    ("SELECT v.a FROM (VALUES (8, 'a')) v(a)", "| 8 "),
    ("WITH c AS (SELECT count(*) FROM customers) SELECT c.count FROM c", "| 3 "),
    ("WITH c(a, b) AS (SELECT 1, 2) SELECT c.a + c.b AS s FROM c", "| 3 "),
    (
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 4)"
        " SELECT max(r.n) FROM r",
        "| 4 ",
    ),
    ("SELECT c.s FROM customers x, LATERAL (SELECT x.id + 1 AS s) c ORDER BY 1 DESC LIMIT 1", "| 4 "),
    ("SELECT c.\"?column?\" FROM customers x, LATERAL (SELECT x.id + 10) c ORDER BY 1 LIMIT 1", "| 11 "),
    ("SELECT q.a, q.email FROM (SELECT id, email FROM customers) q(a) ORDER BY 1 LIMIT 1", "| 1 "),
    ("SELECT q.generate_series FROM (SELECT * FROM generate_series(5, 5)) q", "| 5 "),
    ("SELECT u.u FROM unnest(ARRAY[6]) u", "| 6 "),
    ("SELECT u.u, u.ordinality FROM unnest(ARRAY['b']) WITH ORDINALITY u", "| b "),
    ("SELECT u.x, u.n FROM unnest(ARRAY[3]) WITH ORDINALITY u(x, n)", "| 3 "),
    ("SELECT q.id, q.name FROM (SELECT * FROM customers) q ORDER BY 1 LIMIT 1", "| 1 "),
    ("SELECT q.*, q FROM (SELECT 12 AS a) q", "| 12 "),
    ("WITH c AS (SELECT 13 AS a, 2 AS b) SELECT x.z, x.b FROM c x(z)", "| 13 "),
    ('SELECT Q.count, q.count FROM (SELECT count(*)) Q', "| 1 "),
    ("""SELECT jsonb_each.key FROM jsonb_each('{"k": 1}')""", "| k "),
    ("SELECT q.upper, q.x FROM (SELECT pg_catalog.upper('n'), 'm' COLLATE \"C\" AS x) q", "| N "),
]  # fmt: skip


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt25c") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, email text, name text);
            INSERT INTO customers VALUES (1, 'a@x', 'a'), (2, 'b@x', 'b'), (3, 'c@x', 'c');
            CREATE FUNCTION rt25_cf(c customers) RETURNS text STABLE LANGUAGE sql
              BEGIN ATOMIC SELECT 'rt25 ran'; END;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT ON customers TO {db.reader};
            """
        )
        yield db


@pytest.mark.postgres
def test_postgres_attribute_notation_over_made_up_names_is_refused(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    for sql in REFUSED:
        code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, sql)
        assert code != 0 and "rt25 ran" not in out and "Attribute notation" in out, (sql, out)


@pytest.mark.postgres
def test_postgres_columns_named_as_postgres_names_them_pass(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    for sql, want in PASSED:
        code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, sql)
        assert code == 0 and want in out, (sql, out)


class _Columns:
    def relation_columns(self, refs: Collection[RelationRef]) -> dict[RelationRef, frozenset[str] | None]:
        known = {(None, "customers"): frozenset({"id", "email", "name", "ctid"})}
        return {r: known.get(r) for r in refs}

    def function_columns(self, ref: RelationRef) -> tuple[frozenset[str], bool]:
        if ref == (None, "jsonb_each"):
            return frozenset({"key", "value"}), False
        return (frozenset(), ref == (None, "generate_series"))


@pytest.mark.parametrize("sql", REFUSED)
def test_a_name_postgres_does_not_surely_give_is_refused(sql: str) -> None:
    with pytest.raises(Refused) as caught:
        reject_attribute_calls(sqlglot.parse_one(sql, read="postgres"), "postgres", catalog=_Columns())
    assert (caught.value.data or {}).get("reason") == "attribute_call"


@pytest.mark.parametrize("sql", [sql for sql, _ in PASSED])
def test_a_name_postgres_gives_passes(sql: str) -> None:
    reject_attribute_calls(sqlglot.parse_one(sql, read="postgres"), "postgres", catalog=_Columns())


# Each name as PostgreSQL 15 printed it for the item (None: not sure, so `q.name` refuses).
NAMES = {
    "count(*)": "count", "1 + 1": "?column?", "true": "?column?", "NULL": "?column?", "x": "x",
    "x::int": "x", "'1'::integer": "int4", "'1'::bigint": "int8", "'1'::double precision": "float8",
    "1::numeric(10, 2)": "numeric", "'a'::varchar(3)": "varchar", "'a'::char(2)": "bpchar",
    "'{1}'::int[]": "int4", "DATE '2020-01-01'": "date", "interval '1 day'": "interval",
    "'1'::real": None, "'1'::float": "float8", "CASE WHEN true THEN 1 END": "case",
    "CASE WHEN true THEN 1 ELSE x END": "x", "CASE WHEN true THEN 1 ELSE 2 END::text": "text",
    "coalesce(x, 1)": "coalesce", "greatest(1, 2)": "greatest", "nullif(1, 2)": "nullif",
    "ARRAY[1]": "array", "ARRAY(SELECT 1)": "array", "ROW(1, 2)": "row", "EXISTS(SELECT 1)": "exists",
    "(SELECT 1 AS z)": "z", "(SELECT count(*) FROM t)": "count", "CURRENT_DATE": "current_date",
    "CURRENT_TIMESTAMP": "current_timestamp", "now()": None, "trim(' a')": None, "char_length('a')": None,
    "position('a' in 'b')": "position", "substring('abc' from 1 for 2)": "substring",
    "extract(year from now())": "extract", "now() AT TIME ZONE 'UTC'": "timezone", "(ARRAY[1])[1]": "array",
    "sum(x) FILTER (WHERE true)": "sum", "lag(x) OVER ()": "lag", "string_agg(x, ',')": "string_agg",
    "'a' || 'b'": "?column?", "x IS NULL": "?column?", "'a' ~ 'b'": None, "j ->> 'a'": None,
    '"upper"(x)': None, 'x AS "Q"': "Q", "to_char(now(), 'YYYY')": "to_char", "-x": "?column?",
    "pg_catalog.upper(x)": "upper", 'x COLLATE "C"': "x", "'a' COLLATE \"C\"": "?column?",
}  # fmt: skip


@pytest.mark.parametrize(("item", "name"), NAMES.items())
def test_an_unnamed_item_is_named_as_postgres_15_names_it(item: str, name: str | None) -> None:
    from mcpkit.sql.admission.output_names import item_name  # here: the file also runs on the old code

    select = sqlglot.parse_one(f"SELECT {item} FROM t", read="postgres")
    assert item_name(select.selects[0]) == name
