"""Masking's tie-breakers are held to the sent-tree bound as they are built (red team rt26 F3).

The tie-breaker rewrite added every visible column of a 97-column table, each with SQLite's exact
forms, to each of 99 windows' ORDER BY after the 12,000-node bound was checked: 110,000 nodes, a
5 KB query answered after 10-13 s and +260 MB; 495 windows in a derived table were refused only
after 22 s and 990 MB. Now the tree is counted as the tie-breakers are added and refused at once.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import DEFAULT_BUDGET
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.masking import KnownSchema, MaskPolicy, plan_masking, reflect_schema
from mcpkit.sql.service import Masking, SqlService

POLICY = MaskPolicy.of(["wide.email"])
COLUMNS = [f"c{i}" for i in range(95)]
SCHEMA = {"wide": {"id": "INT", "email": "TEXT", **dict.fromkeys(COLUMNS, "TEXT")}}


def _windows(n: int) -> str:
    return ", ".join(f"row_number() OVER (ORDER BY c{i % 95}) AS r{i}" for i in range(n))


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path: Path = tmp_path_factory.mktemp("rt26b") / "wide.db"
    conn = sqlite3.connect(path)
    cols = ", ".join(f"{c} TEXT" for c in COLUMNS)
    conn.execute(f"CREATE TABLE wide(id INTEGER PRIMARY KEY, email TEXT, {cols})")
    marks = ", ".join("?" * 97)
    conn.executemany(
        f"INSERT INTO wide VALUES ({marks})",
        [(i, f"u{i}@x.example", *(f"v{(i * j) % 7}" for j in range(95))) for i in range(1, 301)],
    )
    conn.commit()
    conn.close()
    engine = SqlEngine(f"sqlite:///{path}")
    schema = KnownSchema(reflect_schema(engine.sa_engine), engine.dialect)
    service = SqlService(engine, masking=Masking(POLICY, schema))
    try:
        yield service
    finally:
        engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT {_windows(99)} FROM wide",  # rt26 sql/mwide3.sql: answered after 10-13 s
        f"SELECT count(*) AS n FROM (SELECT {_windows(495)} FROM wide) AS d",  # mwide6: 22 s, 990 MB
    ],
    ids=["99-windows", "495-windows-derived"],
)
def test_windows_over_a_wide_masked_table_are_refused_before_the_rewrite_grows(
    wide: SqlService, sql: str
) -> None:
    started = time.process_time()
    with pytest.raises(Refused) as info:
        wide.query(sql, call_id="rt26b-f3")
    spent = time.process_time() - started
    assert info.value.data == {"reason": "too_complex"}
    assert "tie-breakers" in info.value.message and "at most 12000" in info.value.message
    assert spent < 12, spent  # was 15-21 s of CPU; about 2-4 s here, 8.5 once on a loaded machine


def test_a_few_windows_over_the_wide_table_are_still_answered(wide: SqlService) -> None:
    result, _ = wide.query(f"SELECT id, {_windows(3)} FROM wide ORDER BY id", call_id="rt26b-f3-ok")
    assert result.row_count > 0 and len(result.columns) == 4


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
def test_every_dialect_counts_its_tie_breakers(dialect: str) -> None:
    """PostgreSQL's and MariaDB's exact forms are smaller, but order.py is shared: 99 windows over
    95 visible columns are 9,400 tie-breakers in any dialect."""
    with pytest.raises(Refused) as info:
        plan_masking(f"SELECT {_windows(99)} FROM wide", dialect, SCHEMA, POLICY)
    assert info.value.data == {"reason": "too_complex"} and "tie-breakers" in info.value.message
    plan = plan_masking(f"SELECT {_windows(3)} FROM wide", dialect, SCHEMA, POLICY)
    assert plan.sql is not None and plan.sql.count("OVER") == 3


def test_the_allowance_is_the_sent_tree_bound() -> None:
    sql = f"SELECT {_windows(12)} FROM wide"
    plan = plan_masking(sql, "sqlite", SCHEMA, POLICY, max_nodes=None)
    assert plan.sql is not None
    with pytest.raises(Refused):
        plan_masking(sql, "sqlite", SCHEMA, POLICY, max_nodes=DEFAULT_BUDGET.max_sent_nodes)
