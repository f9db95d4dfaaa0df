"""Aggregates that keep their whole input in the PostgreSQL backend are limited per query
(admission.limit_aggregates).

Before, eight such aggregates over one 50 MB column took the backend to 1.4 GB (one: 90-230 MB,
`bench/sql_aggregates.py`), with no work_mem limit, spill or per-backend cap to stop it. A query of
two answers as before; three or more are refused before anything reaches the database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_scratch

EIGHT = (
    "SELECT string_agg(body, ',') AS a0, array_agg(body) AS a1, json_agg(body) AS a2, jsonb_agg(body) AS a3,"
    " string_agg(body, ';') AS a4, array_agg(body || '5') AS a5, json_agg(body || '6') AS a6,"
    " jsonb_agg(body || '7') AS a7 FROM t"
)


@pytest.fixture(scope="module")
def service(pg_url: str) -> Iterator[SqlService]:
    """A reader on `t`: 5,000 rows of about 1 KB."""
    with pg_scratch(pg_url, "agg") as s:
        s.admin.execute(
            "CREATE TABLE t AS SELECT g AS id, repeat(md5(g::text), 31) AS body"
            " FROM generate_series(1, 5000) g"
        )
        s.admin.execute(f"GRANT SELECT ON t TO {s.reader}")
        engine = SqlEngine(s.reader_url)
        try:
            yield SqlService(engine, timeout_s=10)
        finally:
            engine.close()


@pytest.mark.postgres
def test_postgres_many_collecting_aggregates_are_refused_before_the_database(service: SqlService) -> None:
    with pytest.raises(Refused) as info:
        service.query(EIGHT, call_id="eight")
    assert info.value.data == {"reason": "too_complex"}
    assert "at most 2 aggregates that collect their whole input" in info.value.message
    # how to rewrite: one aggregate over a row of the columns (three of a 50 MB column took 383 MB,
    # and no guard in the SQL can cap one aggregate's input, so the limit stays)
    assert "json_agg(json_build_object('a', a, 'b', b))" in info.value.message
    two, _ = service.query(
        "SELECT cardinality(array_agg(body)) AS n, octet_length(string_agg(body, ',')) AS b,"
        " cardinality(array_agg(body)) AS again FROM t",
        call_id="two",
    )
    assert two.rows == [[5000, 5000 * 992 + 4999, 5000]]


# red team pg17 F4: one string_agg under ROLLUP of five kept six states (2.1 GB at 30 MB a row); a
# NOT MATERIALIZED CTE read five times computed its string_agg five times (3.2 GB). Here 1 KB rows.
STATES = {
    "rollup": "SELECT length(string_agg(body, '')) AS n FROM t GROUP BY ROLLUP (id % 2, id % 3, id % 5)",
    "cube": "SELECT cardinality(array_agg(body)) AS n FROM t GROUP BY CUBE (id % 2, id % 3)",
    "cte": "WITH c AS NOT MATERIALIZED (SELECT string_agg(body, '') AS s FROM t)"
    " SELECT length(a.s) + length(b.s) + length(d.s) AS n FROM c AS a, c AS b, c AS d",
}


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(STATES))
def test_postgres_a_state_per_grouping_set_or_inlined_cte_counts(name: str, service: SqlService) -> None:
    with pytest.raises(Refused) as info:
        service.query(STATES[name], call_id=name)
    assert info.value.data == {"reason": "too_complex"}


@pytest.mark.postgres
def test_postgres_a_rollup_of_one_level_and_a_materialized_cte_answer(service: SqlService) -> None:
    rollup, _ = service.query(
        "SELECT id % 2 AS k, length(string_agg(left(body, 2), '')) AS n FROM t GROUP BY ROLLUP (id % 2)"
        " ORDER BY k NULLS LAST",
        call_id="rollup1",
    )
    assert rollup.rows == [[0, 5000], [1, 5000], [None, 10000]]
    cte, _ = service.query(
        "WITH c AS (SELECT string_agg(left(body, 2), '') AS s FROM t)"
        " SELECT length(a.s) + length(b.s) + length(d.s) AS n FROM c AS a, c AS b, c AS d",
        call_id="cte",
    )
    assert cte.rows == [[30000]]
