"""Cells are clipped inside the SQL sent: on the real databases, no cell over the budget reaches the driver,
numbers stay numbers, and one call's peak memory stays small whatever the data (measured in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest

from mcpkit.sql.clipping import BinarySize, CellBudget, Clipped, text_chars
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.shaping import shape_cell
from tests.sql.sql_support import DbEnv

BUDGET = CellBudget()
CHARS = text_chars(BUDGET.cell_bytes(26, 4))

HUGE = {
    "postgres": (
        "SELECT g AS n, 2.5::numeric AS d, repeat('x', 5000000) AS t, convert_to(repeat('z', 300000), 'UTF8') AS b,"  # noqa: E501
        " jsonb_build_object('k', repeat('y', 300000)) AS j FROM generate_series(1, 25) g ORDER BY g DESC LIMIT 26"  # noqa: E501
    ),
    "mysql": (
        "SELECT seq AS n, CAST(2.5 AS DECIMAL(4,2)) AS d, REPEAT('x', 5000000) AS t,"
        " CAST(REPEAT('z', 300000) AS BINARY) AS b, JSON_OBJECT('k', REPEAT('y', 300000)) AS j"
        " FROM seq_1_to_25 ORDER BY seq DESC LIMIT 26"
    ),
    "sqlite": (
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 25) SELECT n, 2.5 AS d,"
        " printf('%.*c', 5000000, 'x') AS t, randomblob(300000) AS b, json_object('k', printf('%.*c', 300000, 'y'))"  # noqa: E501
        " AS j FROM g ORDER BY n DESC LIMIT 26"
    ),
}  # fmt: skip


def _check_huge(env: DbEnv) -> None:
    engine = SqlEngine(env.rw_url if env.dialect != "sqlite" else env.ro_url)
    try:
        rows = engine.execute(HUGE[env.dialect], None, 25, 30.0, "clip", clip=BUDGET)
    finally:
        engine.close()
    assert [c.name for c in rows.columns] == ["n", "d", "t", "b", "j"]
    assert [r[0] for r in rows.rows] == list(range(25, 0, -1))  # order kept, numbers stay numbers
    for n, d, t, b, j in rows.rows:
        assert isinstance(n, int) and d in (Decimal("2.5"), 2.5)
        text = t.text if isinstance(t, Clipped) else t  # text is cut by the database to CHARS
        assert isinstance(text, str) and len(text) <= CHARS and set(text) == {"x"}
        assert b == BinarySize(300000)
        assert isinstance(j, Clipped | str) and len(j.text if isinstance(j, Clipped) else j) <= CHARS
    shown = shape_cell(rows.rows[0][2], rows.columns[2].type_name)
    assert isinstance(shown, str) and shown.endswith("...") and len(shown) == 503
    assert shape_cell(rows.rows[0][3]) == "<binary 300000 bytes>"


def test_sqlite_cells_are_clipped_in_sql(sqlite_env: DbEnv) -> None:
    _check_huge(sqlite_env)


@pytest.mark.postgres
def test_postgres_cells_are_clipped_in_sql(pg_env: DbEnv) -> None:
    _check_huge(pg_env)


@pytest.mark.mysql
def test_mysql_cells_are_clipped_in_sql(mysql_env: DbEnv) -> None:
    _check_huge(mysql_env)


def test_small_values_pass_unchanged(sqlite_env: DbEnv) -> None:
    engine = SqlEngine(sqlite_env.ro_url)
    try:
        sql = "SELECT id, region, revenue, receipt, notes FROM sales_demo ORDER BY revenue DESC LIMIT 30"
        clipped = engine.execute(sql, None, 30, 10.0, "a", clip=BUDGET)
        plain = engine.execute(sql, None, 30, 10.0, "b")
    finally:
        engine.close()
    assert [c.name for c in clipped.columns] == [c.name for c in plain.columns]
    for got, want in zip(clipped.rows, plain.rows, strict=True):
        assert got[:3] == want[:3] and got[4] == want[4]
        assert got[3] == BinarySize(len(want[3]))


def test_the_cell_budget_shrinks_with_the_result() -> None:
    assert BUDGET.cell_bytes(26, 1) == BUDGET.max_cell
    assert BUDGET.cell_bytes(5001, 100) == BUDGET.min_cell
    assert 501 * 10 * BUDGET.cell_bytes(501, 10) <= BUDGET.call_bytes


_CHILD = """
import json, sys
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
def status_kb(key):  # VmHWM is this process's own peak (ru_maxrss would count the parent's)
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
def rss_kb():
    return status_kb("VmRSS:")
service = SqlService(SqlEngine(sys.argv[1]), max_rows=500, timeout_s=60.0)
service.query("SELECT 1", call_id="warm", max_rows=1)
before = rss_kb()
result, _ = service.query(sys.argv[2], call_id="big", max_rows=500)
print(json.dumps({"mb": (status_kb("VmHWM:") - before) / 1024,
                  "rows": result.row_count}))
"""

PEAK = {
    "postgres": "SELECT repeat('x', 20000000) AS t FROM generate_series(1, 25)",
    # 200 MB unclipped: under the session's cap on temporary tables (MariaDB refuses larger results
    # with "table is full" before anything reaches mcpkit).
    "mysql": "SELECT REPEAT('x', 8000000) AS t FROM seq_1_to_25",
    "sqlite": "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 25)"
    " SELECT printf('%.*c', 10000000, 'x') AS t FROM g",
}


def _peak_mb(env: DbEnv) -> float:
    url = env.rw_url if env.dialect != "sqlite" else env.ro_url
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, url, PEAK[env.dialect]],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["rows"] == 25
    return float(found["mb"])


# Unclipped, these calls hold 250-500 MB of cells; clipped in SQL they stay far below 64 MB.
def test_sqlite_peak_memory_is_bounded(sqlite_env: DbEnv) -> None:
    assert _peak_mb(sqlite_env) < 64


@pytest.mark.postgres
def test_postgres_peak_memory_is_bounded(pg_env: DbEnv) -> None:
    assert _peak_mb(pg_env) < 64


@pytest.mark.mysql
def test_mysql_peak_memory_is_bounded(mysql_env: DbEnv) -> None:
    assert _peak_mb(mysql_env) < 64
