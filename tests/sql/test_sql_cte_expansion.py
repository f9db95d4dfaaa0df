"""A query whose CTEs expand past a bound is refused before the engine compiles it (red team rt15my F5).

SQLite compiles a CTE's body once per reference, inside `sqlite3_prepare`, where neither the
progress handler nor the watchdog's interrupt runs: a chain of CTEs each reading the previous one
twice answered a 2 s call at 4-8 s and went on burning CPU after it. MariaDB and PostgreSQL (with
NOT MATERIALIZED) copy the same way; admission counts the copies (`admission.limit_expansion`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from typing import Any, cast

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import admit
from mcpkit.sql.admission.limit_expansion import RelationRef
from mcpkit.sql.definers import DefinerCatalog
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv, pg_scratch

TIMEOUT_S = 2.0


def _chain(levels: int, hint: str = "") -> str:
    parts = ["c0(x) AS (SELECT 1)"]
    parts += [f"c{i}(x) AS {hint}(SELECT a.x FROM c{i - 1} a, c{i - 1} b)" for i in range(1, levels + 1)]
    return "WITH " + ", ".join(parts) + f" SELECT COUNT(*) AS n FROM c{levels}"


@pytest.fixture
def service(sqlite_env: DbEnv) -> SqlService:
    return SqlService(SqlEngine(sqlite_env.ro_url), timeout_s=TIMEOUT_S)


@pytest.mark.parametrize("hint", ["", "NOT MATERIALIZED "])
def test_sqlite_a_doubling_cte_chain_is_refused_before_it_compiles(service: SqlService, hint: str) -> None:
    started = time.monotonic()
    with pytest.raises(Refused) as info:
        service.query(_chain(18, hint), call_id="cte-chain")
    assert time.monotonic() - started < TIMEOUT_S  # before: answered past the timeout, or TIMEOUT at 17 s
    assert info.value.data == {"reason": "too_complex"}
    assert "expand to more than 1024 SELECTs" in info.value.message


def test_sqlite_a_short_chain_still_answers(service: SqlService) -> None:
    result, _ = service.query(_chain(8), call_id="cte-chain")
    assert result.rows == [[1]]


def _doubling(levels: int, step: str) -> str:
    parts = ["c0 AS (SELECT 1 AS x)"]
    parts += [f"c{i} AS (SELECT {step} AS x FROM c{i - 1})" for i in range(1, levels + 1)]
    return "WITH " + ", ".join(parts) + f" SELECT x FROM c{levels}"


@pytest.mark.parametrize(
    ("levels", "step"),
    [(24, "x + x"), (17, "JSON_SET(x, '$.a', 1)"), (14, "LOCATE(x, x)")],
)
def test_expressions_that_double_through_merged_ctes_are_refused(levels: int, step: str) -> None:
    # red team rt16 F3 (a column read twice per level) and F1 (a size guard reads its operand three
    # times, so one JSON_SET per level tripled): MariaDB merged the CTEs and evaluated the tree
    # while optimising, minutes past a 2 s call, deaf to KILL
    with pytest.raises(Refused) as info:
        admit(_doubling(levels, step), "mysql")
    assert info.value.data == {"reason": "too_complex"}
    assert "grow past what can be evaluated safely" in info.value.message


@pytest.mark.mysql
def test_mariadb_a_short_doubling_chain_still_answers(mysql_url: str) -> None:
    engine = SqlEngine(mysql_url)
    try:
        result, _ = SqlService(engine, timeout_s=TIMEOUT_S).query(_doubling(12, "x + x"), call_id="chain")
    finally:
        engine.close()
    assert result.rows == [[4096]]


# Red team pg15 F2 and its neighbours: shapes whose columns sqlglot's scopes did not resolve, so
# each counted as one node, while PostgreSQL pulls them up and substitutes the expression. Measured
# on PostgreSQL 15 at 20 levels, 2 s statement_timeout, before the fix: LATERAL 2.7 s / 296 MB (25
# levels: 3.5 GB), SELECT * passthrough 16 s / 1.7 GB, `AS d(x)` 7.4 s / 1.3 GB, a scalar subquery
# 38 s / 4.8 GB, UNION ALL branches 3.0 s / 0.9 GB.
def _lateral(levels: int, source: str = "SELECT units AS x FROM sales_demo LIMIT 1") -> str:
    steps = "".join(f", LATERAL (SELECT a{i - 1}.x + a{i - 1}.x AS x) AS a{i}" for i in range(1, levels + 1))
    return f"SELECT a{levels}.x AS x FROM ({source}) AS a0{steps}"


def _nested(levels: int, step: str, source: str = "SELECT units AS x FROM sales_demo") -> str:
    query = f"({source}) AS d0"
    for i in range(1, levels + 1):
        query = step.format(p=f"d{i - 1}", q=query, i=i)
    return "SELECT * FROM " + query


SHAPES = {
    "star": "(SELECT s.x + s.x AS x FROM (SELECT * FROM {q}) AS s) AS d{i}",
    "renamed": "(SELECT {p}.x + {p}.x FROM {q}) AS d{i}(x)",
    "scalar": "(SELECT (SELECT {p}.x + {p}.x) AS x FROM {q}) AS d{i}",
    "union": "(SELECT 0 AS x UNION ALL SELECT {p}.x + {p}.x FROM {q}) AS d{i}",
    "unqualified lateral": "(SELECT l.y AS x FROM {q}, LATERAL (SELECT x + x AS y) AS l) AS d{i}",
}


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_a_doubling_lateral_chain_is_refused(dialect: str) -> None:
    with pytest.raises(Refused) as info:
        admit(_lateral(20), dialect)
    assert info.value.data == {"reason": "too_complex"}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_doubling_through_star_alias_lists_subqueries_and_unions_is_refused(shape: str) -> None:
    with pytest.raises(Refused) as info:
        admit(_nested(20, SHAPES[shape]), "postgres")
    assert info.value.data == {"reason": "too_complex"}


@pytest.fixture
def pg_service(pg_env: DbEnv) -> Iterator[SqlService]:
    engine = SqlEngine(pg_env.ro_url)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_a_doubling_lateral_chain_is_refused_before_it_plans(pg_service: SqlService) -> None:
    # before: 22 levels took the backend to 1.1 GB and answered past the 2 s timeout
    started = time.monotonic()
    with pytest.raises(Refused) as info:
        pg_service.query(_lateral(22), call_id="lateral")
    assert info.value.data == {"reason": "too_complex"}
    assert time.monotonic() - started < TIMEOUT_S


@pytest.mark.postgres
@pytest.mark.parametrize("shape", ["lateral", *sorted(SHAPES)])
def test_postgres_short_chains_of_each_shape_still_answer(pg_service: SqlService, shape: str) -> None:
    source = "SELECT 1 AS x FROM sales_demo LIMIT 1"
    sql = _lateral(8, source) if shape == "lateral" else _nested(8, SHAPES[shape], source)
    result, _ = pg_service.query(sql + " LIMIT 1" if shape == "union" else sql, call_id="short")
    assert result.rows[0][0] in {0, 1, 256}


def _wide_chain(levels: int, columns: int) -> str:
    t0 = "t0 AS (SELECT " + ", ".join(f"region AS c{i}" for i in range(columns)) + " FROM sales_demo)"
    parts = [t0] + [f"t{k} AS (SELECT * FROM t{k - 1})" for k in range(1, levels)]
    return "WITH " + ", ".join(parts) + f" SELECT COUNT(*) AS n FROM t{levels - 1}"


@pytest.mark.postgres
def test_postgres_a_long_chain_of_wide_ctes_is_refused_before_it_plans(pg_service: SqlService) -> None:
    # red team rt33a F4: 148 levels of 600 columns planned 21 s past a 1 s statement_timeout;
    # 37 levels measured 1.2 s of planning here, with no interrupt check
    for levels, columns in ((148, 600), (40, 600), (120, 30)):
        started = time.monotonic()
        with pytest.raises(Refused) as info:  # before: `timeout`, the backend planning on
            pg_service.query(_wide_chain(levels, columns), call_id="wide")
        assert info.value.data == {"reason": "too_complex"}
        # admission's own parse of up to 90,000 columns; the planner took 21 s before
        assert time.monotonic() - started < 10.0
    result, _ = pg_service.query(_wide_chain(20, 100), call_id="narrow")  # 23,001 of 200,000
    assert result.rows[0][0] > 0


@pytest.mark.postgres
def test_postgres_a_views_column_counts_as_the_expression_it_stands_for(pg_url: str) -> None:
    # PostgreSQL merges a view's body into the query, so a view's column counted as one node: over
    # a view whose column is a 60-branch CASE, ten LATERAL levels (12,293 nodes counted) took the
    # backend to 1 GB and 1.9 s, thirteen to 2.7 GB and a 5 s timeout; over the table, 0.04 s.
    case = "CASE " + " ".join(f"WHEN n = {i} THEN n + {i}" for i in range(60)) + " ELSE n END"
    with pg_scratch(pg_url, "views") as db:
        db.admin.execute("CREATE TABLE t (n int)")
        db.admin.execute("INSERT INTO t VALUES (1)")
        db.admin.execute(f"CREATE VIEW wide AS SELECT {case} AS x FROM t")
        engine = SqlEngine(db.admin_url)
        try:
            service = SqlService(engine, timeout_s=TIMEOUT_S)
            started = time.monotonic()
            with pytest.raises(Refused) as info:
                service.query(_lateral(10, "SELECT x FROM wide"), call_id="view")
            assert info.value.data == {"reason": "too_complex"}
            assert time.monotonic() - started < TIMEOUT_S
            assert service.query(_lateral(10, "SELECT n AS x FROM t"), call_id="table")[0].rows == [[1024]]
            assert service.query(_lateral(5, "SELECT x FROM public.wide"), call_id="short")[0].rows == [[64]]
        finally:
            engine.close()


class _Views:
    """A catalog whose relation `wide` is a view with a 2,000-node column."""

    def volatile(self, refs: object) -> set[object]:
        return set()

    def view_nodes(self, refs: Collection[RelationRef]) -> dict[RelationRef, int]:
        return {r: 2000 if r[1] == "wide" else 1 for r in refs}


def test_a_views_column_counts_as_its_size_and_the_role_maps_catalog_passes_it_on() -> None:
    chain = _lateral(8, "SELECT x FROM wide")
    assert admit(chain, "postgres").sql  # without a catalog each column is one node
    for catalog in (_Views(), DefinerCatalog(cast(Any, None), _Views())):
        with pytest.raises(Refused) as info:
            admit(chain, "postgres", catalog=catalog)
        assert info.value.data == {"reason": "too_complex"}
    admit(_lateral(8, "SELECT x FROM narrow"), "postgres", catalog=_Views())
    assert DefinerCatalog(cast(Any, None)).view_nodes([(None, "wide")]) == {}
