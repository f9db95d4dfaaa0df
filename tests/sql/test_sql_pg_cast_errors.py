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
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService

TIMEOUT_S = 10.0
MARKER = "mcpkit_search_bound"
LARGE = {
    "int of a computed text": "SELECT repeat('x', 5000000)::int AS n",
    "numeric of a json field": "SELECT (json_build_object('n', repeat('9', 3000000)) ->> 'n')::numeric AS n",
    "date in a subquery": "SELECT * FROM (SELECT CAST(repeat('1', 2000000) AS date) AS d) AS s",
    "multirange of a constant": "SELECT ('{' || repeat('[1,2),', 300000) || '[1,2)}')::int4multirange AS m",
}


@pytest.fixture
def service(pg_url: str) -> Iterator[SqlService]:
    engine = SqlEngine(pg_url)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


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
