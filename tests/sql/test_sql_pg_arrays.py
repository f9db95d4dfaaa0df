"""PostgreSQL array constructors survive regeneration: sqlglot wrote `ARRAY[(SELECT 1), 2]` as
`ARRAY((SELECT 1))`, the subquery form, and dropped every other item (a helper found
`ARRAY[to_jsonb(a), to_jsonb(c)]` answering one item once a guard held the first in a subquery).
With one item the two forms differ too: a subquery of two rows is an error in brackets and a
two-item array in parentheses. Each shape here answers alike as written and as sent, also where
masking writes `pg_catalog.f(...)` as `f(...)` (it wrote the arguments in sqlglot's own dialect).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlglot

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.grammar import read_dialect, sent_dialect
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import DbEnv, assert_guarded_answers_alike, service_over

TIMEOUT_S = 10.0
SHAPES = {
    "subquery first": "SELECT ARRAY[(SELECT max(id) FROM sales_demo), 0] AS a",
    "subquery only": "SELECT ARRAY[(SELECT max(id) FROM sales_demo)] AS a",
    "two subqueries": "SELECT ARRAY[(SELECT 1), (SELECT 2)] AS a",
    "subquery last": "SELECT ARRAY[0, (SELECT min(id) FROM sales_demo)] AS a",
    "nested arrays": "SELECT ARRAY[ARRAY[1, 2], ARRAY[3, 4]] AS a",
    "nested subquery first": "SELECT ARRAY[ARRAY[(SELECT 1), 2], ARRAY[3, 4]] AS a",
    "cast": "SELECT ARRAY[(SELECT 1)]::text[] AS a, ARRAY[(SELECT 1), 2]::text[] AS b",
    "subscript": "SELECT (ARRAY[(SELECT 5), 6])[2] AS a",
    "any": "SELECT id FROM sales_demo WHERE id = ANY(ARRAY[(SELECT min(id) FROM sales_demo), 3]) ORDER BY id",
    "subquery form": "SELECT ARRAY(SELECT id FROM sales_demo ORDER BY id LIMIT 3) AS a",
    "subquery form in parentheses": "SELECT ARRAY((SELECT id FROM sales_demo ORDER BY id LIMIT 3)) AS a",
    "subquery form of a union": "SELECT ARRAY(SELECT 1 UNION ALL SELECT 2) AS a",
}
# a subquery of two rows as the one item: an error in brackets (old code sent the subquery form,
# which answered {1,2})
TWO_ROWS = "SELECT ARRAY[(SELECT g FROM generate_series(1, 2) AS g)] AS a"


@pytest.fixture
def service(pg_env: DbEnv) -> Iterator[SqlService]:
    with service_over(pg_env.ro_url, TIMEOUT_S) as s:
        yield s


def _regenerated(sql: str) -> str:
    return sqlglot.parse_one(sql, read=read_dialect("postgres")).sql(dialect=sent_dialect("postgres"))


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_postgres_an_array_constructor_answers_alike_regenerated(name: str, service: SqlService) -> None:
    sql = SHAPES[name]
    plain = service.engine.execute(sql, None, 100, TIMEOUT_S, "plain")
    regenerated = service.engine.execute(_regenerated(sql), None, 100, TIMEOUT_S, "regenerated")
    assert regenerated.rows == plain.rows and plain.rows
    assert [c.type_name for c in regenerated.columns] == [c.type_name for c in plain.columns]
    assert_guarded_answers_alike(service, service.admit(sql, 100).sql, sql, len(plain.rows), TIMEOUT_S)


@pytest.mark.postgres
def test_postgres_one_subquery_of_two_rows_in_brackets_stays_an_error(service: SqlService) -> None:
    assert "ARRAY[(SELECT" in _regenerated(TWO_ROWS)
    with pytest.raises(QueryFailed):
        service.query(TWO_ROWS, call_id="two-rows")


@pytest.mark.postgres
def test_postgres_a_guard_holding_the_first_item_keeps_the_others(service: SqlService) -> None:
    sql = (
        "SELECT ARRAY[to_jsonb(a || a), to_jsonb(c)] AS x, ARRAY[to_jsonb(a || c)] AS y"
        " FROM (VALUES ('abc', 'z')) AS v(a, c)"
    )
    sent = service.admit(sql, 10).sql
    assert "mcpkit_once" in sent and "mcpkit_size_bound" in sent  # the first item is held
    assert_guarded_answers_alike(service, sent, sql, 1, TIMEOUT_S)
    result, _ = service.query(sql, call_id="held-array")
    assert result.rows == [[["abcabc", "z"], ["abcz"]]]


@pytest.mark.postgres
def test_postgres_a_qualified_call_over_an_array_keeps_its_items_under_masks(pg_env: DbEnv) -> None:
    engine = SqlEngine(pg_env.ro_url)
    try:
        schema = KnownSchema(reflect_schema(engine.sa_engine), engine.dialect)
        service = SqlService(
            engine, timeout_s=TIMEOUT_S, masking=Masking(MaskPolicy.of(["sales_demo.notes"]), schema)
        )
        sql = (
            "SELECT id, notes, pg_catalog.array_to_string(ARRAY[(SELECT min(id) FROM sales_demo), id],"
            " ',') AS s FROM sales_demo ORDER BY id LIMIT 2"
        )
        result, _ = service.query(sql, call_id="masked-array")
    finally:
        engine.close()
    assert [(r[0], r[1], r[2]) for r in result.rows] == [(1, "<masked>", "1,1"), (2, "<masked>", "1,2")]
