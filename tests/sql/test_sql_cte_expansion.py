"""A query whose CTEs expand past a bound is refused before the engine compiles it (red team rt15my F5).

SQLite compiles a CTE's body once per reference, inside `sqlite3_prepare`, where neither the
progress handler nor the watchdog's interrupt runs: a chain of CTEs each reading the previous one
twice answered a 2 s call at 4-8 s and went on burning CPU after it. MariaDB and PostgreSQL (with
NOT MATERIALIZED) copy the same way; admission counts the copies (`admission.limit_expansion`).
"""

from __future__ import annotations

import time

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv

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
    assert time.monotonic() - started < 1.0  # unbounded: answered past the timeout, or TIMEOUT at 17 s
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
