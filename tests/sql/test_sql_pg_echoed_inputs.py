"""PostgreSQL: a function whose error quotes its whole argument fails before it runs on a large
computed text (red team rt21 F5).

`to_tsquery` and `parse_ident` put their whole input in the error, as a failed cast does, and libpq
and psycopg copy it several times in the client: `to_tsquery('simple', <100 MB string_agg>)` took
the mcpkit process from 137 MB to 875 MB. Their text arguments get the cast's 1 MB guard
(`postgres_echoed.ECHOED`, measured: `test_sql_pg_echo_table.py`).
"""

from __future__ import annotations

import pytest

from mcpkit.sql.admission import admit
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_service_fixture, rss_kb

TIMEOUT_S = 10.0
MARKER = "mcpkit_search_bound"
# about 20 MB of text each, built past the 64 MB repeat cap's reach by an aggregate where noted
LARGE = {
    "to_tsquery of an aggregate": "SELECT to_tsquery('simple', (SELECT string_agg('aaaaaaaaa', ' ')"
    " FROM generate_series(1, 2000000)))::text AS a",
    "to_tsquery, one argument": "SELECT to_tsquery(repeat('a ', 10000000))::text AS a",
    "to_tsquery, qualified": "SELECT pg_catalog.to_tsquery('simple', repeat('a ', 10000000))::text AS a",
    "parse_ident": "SELECT parse_ident(repeat('a b', 7000000)) AS a",
    "parse_ident of a CTE column": "WITH c AS (SELECT repeat('a b', 7000000) AS v)"
    " SELECT parse_ident(v) AS a FROM c",
}


service = pg_service_fixture(TIMEOUT_S)


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(LARGE))
def test_postgres_an_echoed_input_is_refused_before_it_is_quoted(name: str, service: SqlService) -> None:
    before = rss_kb() // 1024
    with pytest.raises(QueryFailed) as info:
        service.query(LARGE[name], call_id="echo")
    assert info.value.kind == "resource", info.value.message  # unguarded: `data`, its input quoted whole
    assert rss_kb() // 1024 - before < 32  # unguarded: about 7 times the 20 MB message


@pytest.mark.postgres
def test_postgres_small_echoing_calls_answer_and_fail_as_before(service: SqlService) -> None:
    sql = "SELECT to_tsquery('simple', 'a' || ' & b')::text AS q, parse_ident('s.' || 't') AS i"
    assert MARKER in admit(sql, "postgres").sql
    result, _ = service.query(sql, call_id="ok")
    assert str(result.rows[0][0]) == "'a' & 'b'"
    assert list(result.rows[0][1]) == ["s", "t"]
    for bad in (
        "SELECT to_tsquery('simple', 'a' || ' b')::text AS q",
        "SELECT parse_ident('a' || ' b') AS i",
    ):
        with pytest.raises(QueryFailed) as info:
            service.query(bad, call_id="bad")
        assert info.value.kind in ("data", "syntax"), info.value.message  # as before: no guard
