"""A query's guarded searches share one time budget (red team rt35c F4), on the real engines.

Each guard capped its own call at the full budget, and a query may hold 64: one row ran them back
to back with no interrupt check, 64 PostgreSQL btrim() calls 20 s of CPU past a 2 s timeout and 40
MariaDB LOCATE() calls 13 s. Each search's budget is now the budget divided by the searches in the
query, so these are refused before they start (`resource`), where alone each still runs.
"""

from __future__ import annotations

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv

TIMEOUT_S = 6.0  # also the analysis wall-clock ceiling: 64 terms analyse in about 1 s on a loaded host


def _sum(term: str, n: int) -> str:
    return " + ".join([term] * n)


# rt35c repro/f4_pg_trim.txt: each btrim about 0.3 s, under its own budget
PG_CTE = "WITH c AS MATERIALIZED (SELECT repeat('a', 99000) || 'z' s, repeat('b', 999) || 'a' f)"
PG_TERM = "length(btrim(s, f))"
# rt35c repro/f5_maria_locate.txt: each LOCATE about 0.3 s, under its own budget
MY_CTE = (
    "WITH c AS (SELECT CAST(repeat('a', 999000) AS BINARY) s,"
    " CAST(concat(repeat('a', 499), 'b') AS BINARY) n)"
)
MY_TERM = "locate(n, s)"


def _refused(url: str, sql: str) -> None:
    service = SqlService(SqlEngine(url), timeout_s=TIMEOUT_S)
    try:
        with pytest.raises(QueryFailed) as info:
            service.query(sql, call_id="rt35c-f4", max_rows=1)
        # refused by the guards before any search runs; before, TIMEOUT (and the server ran on)
        assert info.value.data is not None and info.value.data["reason"] == "resource"
    finally:
        service.engine.close()


def _answers(url: str, sql: str) -> list[list[object]]:
    service = SqlService(SqlEngine(url), timeout_s=10.0)
    try:
        result, _ = service.query(sql, call_id="rt35c-f4-one", max_rows=1)
        return result.rows
    finally:
        service.engine.close()


def test_postgres_many_trims_share_the_budget(pg_env: DbEnv) -> None:
    _refused(pg_env.ro_url, f"{PG_CTE} SELECT {_sum(PG_TERM, 64)} AS n FROM c")
    # alone, the same call is within its budget and answers
    assert _answers(pg_env.ro_url, f"{PG_CTE} SELECT {PG_TERM} AS n FROM c") == [[1]]  # the z


def test_mariadb_many_locates_share_the_budget(mysql_env: DbEnv) -> None:
    _refused(mysql_env.ro_url, f"{MY_CTE} SELECT {_sum(MY_TERM, 40)} AS n FROM c")
    assert _answers(mysql_env.ro_url, f"{MY_CTE} SELECT {MY_TERM} AS n FROM c") == [[0]]
