"""PostgreSQL: a cast of a large computed text fails before it is parsed (red team rt15pg F5, F8).

A failed input conversion quotes its whole input in the error, and libpq and psycopg copy it about
eight times in the client: `repeat('x', 50000000)::int` took the mcpkit process from 33 MB to
495 MB. Casts of computed text to scalar types are guarded by the text's bytes (1 MB, past any
valid number, date or address). PostgreSQL also evaluates a cast over constants while planning,
before any guard whose condition tests a run-time type (`pg_typeof` is stable, so not folded
first): such operands are sent as scalar subqueries, which it does not fold.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mcpkit.sql.admission import admit
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv, pg_has_libxml, pg_service_fixture, rss_kb, service_over

TIMEOUT_S = 10.0
MARKER = "mcpkit_search_bound"
LARGE = {
    "int of a computed text": "SELECT repeat('x', 5000000)::int AS n",
    "numeric of a json field": "SELECT (json_build_object('n', repeat('9', 3000000)) ->> 'n')::numeric AS n",
    "date in a subquery": "SELECT * FROM (SELECT CAST(repeat('1', 2000000) AS date) AS d) AS s",
    "multirange of a constant": "SELECT ('{' || repeat('[1,2),', 300000) || '[1,2)}')::int4multirange AS m",
    # red team pg17 F3: every type but a string quotes its input (or json its bad token) when it fails
    "oid": "SELECT (repeat('x', 5000000))::oid AS o",
    "regtype": "SELECT (repeat('x', 5000000))::regtype AS t",
    "point": "SELECT (repeat('x', 5000000))::point AS p",
    "macaddr": "SELECT (repeat('x', 5000000))::macaddr AS m",
    "tsquery": "SELECT ('{' || repeat('x', 5000000) || '}')::tsquery AS q",
    "json token": "SELECT length(('[1,' || repeat('x', 5000000) || ']')::json::text) AS n",
    # a column of a CTE or derived table is computed text, not a stored column
    "int of a CTE column": "WITH c AS (SELECT repeat('x', 5000000) AS v) SELECT v::int AS n FROM c",
    "int of a derived column": "SELECT v::int AS n FROM (SELECT repeat('x', 5000000) AS v) AS d",
    "int of a grouped CTE column": "WITH c AS (SELECT repeat('x', 5000000) AS v)"
    " SELECT v::int AS n FROM c GROUP BY v",
    "int of a CTE expression grouped": "WITH c AS (SELECT repeat('x', 5000000) AS v)"
    " SELECT (v || '')::int AS n FROM c GROUP BY v || ''",
}


service = pg_service_fixture(TIMEOUT_S)


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(LARGE))
def test_postgres_a_large_computed_cast_fails_before_it_is_parsed(name: str, service: SqlService) -> None:
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(LARGE[name], call_id="cast")
    assert info.value.kind == "resource", info.value.message  # unguarded: `data`, input quoted whole
    assert time.monotonic() - started < TIMEOUT_S


@pytest.mark.postgres
def test_postgres_small_casts_answer_and_fail_as_before(service: SqlService) -> None:
    result, _ = service.query("SELECT ('1' || '2')::int AS n, ('2024-01-' || '31')::date AS d", call_id="ok")
    assert [[str(v) for v in row] for row in result.rows] == [["12", "2024-01-31"]]
    with pytest.raises(QueryFailed) as info:
        service.query("SELECT ('a' || 'bc')::int AS n", call_id="bad")
    assert info.value.kind == "data"


def test_a_column_cast_keeps_its_expression_index() -> None:
    sql = "SELECT id FROM t WHERE created_at::date = '2024-01-01' AND amount::numeric > 0"
    assert MARKER not in admit(sql, "postgres").sql
    joined = "SELECT a.id FROM s.t AS a JOIN u ON u.id = a.id WHERE a.code::int = 3 AND u.at::oid > 0"
    assert MARKER not in admit(joined, "postgres").sql


# Red team pg15 F3: a call of one argument named after a type is the same cast (PostgreSQL's
# function-style cast), which the guard did not see. Before: `int4(repeat('x', 50000000))` took the
# mcpkit process up by ~480 MB (its input quoted in the error), `xml(repeat('<a x="1"/>',
# 6000000))` a backend to 2.8 GB, past a 5 s timeout.
FUNCTION_STYLE = {
    "int4": "SELECT int4(repeat('x', 5000000)) AS n",
    "date": "SELECT date(repeat('1', 2000000)) AS d",
    "numeric, qualified": "SELECT pg_catalog.numeric(repeat('9', 3000000)) AS n",
    "xml": "SELECT length(xml(repeat('<a x=\"1\"/>', 600000))::text) AS n",
    "int4range": "SELECT int4range(repeat('[1,2)', 300000)) AS r",
}


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(FUNCTION_STYLE))
def test_postgres_a_large_function_style_cast_fails_before_it_is_parsed(
    name: str, service: SqlService
) -> None:
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(FUNCTION_STYLE[name], call_id="cast")
    assert info.value.kind == "resource", info.value.message
    assert time.monotonic() - started < TIMEOUT_S


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT int4(repeat('x', 50000000)) AS n",
        "SELECT (repeat('x', 50000000))::oid AS o",  # red team pg17 F3: mcpkit 510 MB
        "WITH c AS (SELECT repeat('x', 50000000) AS v) SELECT v::int AS n FROM c",  # 509 MB
    ],
)
def test_postgres_a_failed_cast_keeps_its_input_out_of_mcpkit(sql: str, service: SqlService) -> None:
    before = rss_kb() // 1024
    with pytest.raises(QueryFailed) as info:
        service.query(sql, call_id="cast")
    assert info.value.kind == "resource", info.value.message
    assert rss_kb() // 1024 - before < 64


@pytest.mark.postgres
def test_postgres_function_style_casts_answer_and_fail_as_before(service: SqlService, pg_url: str) -> None:
    # a build without libxml (pgserver's 16.2) has no xml(): its column is left out there
    xml = pg_has_libxml(pg_url)
    sql = (
        "SELECT int4(units) AS u, int4('1' || '2') AS n, date('2024-01-' || '31') AS d,"
        + (" length(xml('<a>' || 'b</a>')::text) AS x," if xml else " 8 AS x,")
        + " int8(units) AS m FROM (VALUES (7), (3)) AS v(units) ORDER BY units LIMIT 1"
    )
    assert MARKER in admit(sql, "postgres").sql  # the computed texts are guarded (a VALUES column too)
    result, _ = service.query(sql, call_id="ok")
    assert [str(v) for v in result.rows[0][1:4]] == ["12", "2024-01-31", "8"]
    assert result.rows[0][0] == result.rows[0][4]
    with pytest.raises(QueryFailed) as info:
        service.query("SELECT int4('a' || 'bc') AS n", call_id="bad")
    assert info.value.kind == "data"


@pytest.mark.postgres
def test_postgres_a_guarded_cast_of_an_aggregate_or_window_keeps_its_meaning(service: SqlService) -> None:
    # an aggregate was sent as `(SELECT CAST(COUNT(*) AS TEXT))`, which counts the subquery's one row
    sql = "SELECT count(*)::text::int AS n, count(*) AS plain FROM (VALUES (1), (2), (3)) AS v(x)"
    result, _ = service.query(sql, call_id="agg")
    assert result.rows == [[3, 3]]
    sql = "SELECT (row_number() OVER (ORDER BY x))::text::int AS r FROM (VALUES (1), (2), (3)) AS v(x)"
    result, _ = service.query(sql, call_id="window")
    assert result.rows == [[1], [2], [3]]


@pytest.mark.postgres
def test_postgres_a_cast_of_a_grouped_cte_expression_still_answers(service: SqlService) -> None:
    # the guarded operand may not become a subquery reading `code`, which is grouped only within it
    sql = (
        "WITH x AS (SELECT 'a' || (g % 3) AS code FROM generate_series(1, 9) g)"
        " SELECT substr(code, 2, 1)::int AS d, count(*) AS n FROM x GROUP BY substr(code, 2, 1) ORDER BY 1"
    )
    assert MARKER in admit(sql, "postgres").sql
    result, _ = service.query(sql, call_id="grouped")
    assert result.rows == [[0, 3], [1, 3], [2, 3]]


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT (repeat('x', 50000000))::int AS n",
        "WITH c AS (SELECT repeat('x', 50000000) AS v) SELECT v::int AS n FROM c",
    ],
)
def test_postgres_a_guarded_cast_computes_its_operand_once(sql: str, service: SqlService) -> None:
    # the guard tested the operand's type and size on copies of it: a 50 MB text was computed five
    # times or more (twice as many with planning), 4-6 s to refuse; once, about 0.7 s
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(sql, call_id="once")
    assert info.value.kind == "resource", info.value.message
    assert time.monotonic() - started < 3.0


@pytest.fixture
def demo_service(pg_env: DbEnv) -> Iterator[SqlService]:
    with service_over(pg_env.ro_url, TIMEOUT_S) as service:
        yield service


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT (region || repeat('x', 50000000))::int AS n FROM {schema}.sales_demo",  # a stored column
        "SELECT (x || repeat('x', 50000000))::int AS n FROM (VALUES ('a')) AS v(x)",
    ],
)
def test_postgres_a_cast_of_a_column_and_computed_text_computes_it_once(
    sql: str, pg_env: DbEnv, demo_service: SqlService
) -> None:
    # the operand mixes a column (so it is never a constant) with built text: the guard computed it
    # five times (10-12 s to refuse 50 MB on a loaded host); once, in the guard's one-row hold
    sql = sql.format(schema=pg_env.schema)
    assert admit(sql, "postgres").sql.upper().count("REPEAT(") == 1
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        demo_service.query(sql, call_id="once")
    assert info.value.kind == "resource", info.value.message
    assert time.monotonic() - started < 6.0
