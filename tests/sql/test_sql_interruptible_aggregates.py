"""interruptible_calls and aggregates on SQLite: the analyst tools' COUNTs and bounds go as written,
and the calls in an aggregate's arguments get the jump the interrupt is checked at (per row)."""

from __future__ import annotations

import re
import sqlite3
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from mcpkit.sql.admission import Admitted, admit
from mcpkit.sql.analysis.profiling import profile_table
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService

COLUMNS = [f"c{i}" for i in range(8)]


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("interruptible") / "wide.db"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE wide(id INTEGER PRIMARY KEY, {', '.join(f'{c} TEXT' for c in COLUMNS)})")
    conn.executemany(
        f"INSERT INTO wide VALUES (?, {', '.join('?' * len(COLUMNS))})",
        [(i, *(f"v{i % 3}{c}" for c in COLUMNS)) for i in range(30)],
    )
    conn.commit()
    conn.close()
    return path


def test_the_profile_of_a_wide_table_is_sent_without_wrappers(wide: Path) -> None:
    service = SqlService(SqlEngine(f"sqlite:///{wide}"), timeout_s=5.0)
    sent: list[str] = []

    def record(sql: str, dialect: str, **options: Any) -> Admitted:
        admitted = admit(sql, dialect, **options)
        sent.append(admitted.sql)
        return admitted

    service._admit = record  # the text admission sends
    try:
        profile = profile_table(service, "wide", call_id="interruptible-profile")
    finally:
        service.engine.close()
    counted = [s for s in sent if "COUNT(DISTINCT" in s.upper()]
    assert counted, sent  # the profile's aggregate query: 9 columns of COUNT, COUNT(DISTINCT), MIN, MAX
    # before: a CASE around each aggregate, coded after the scan; since red team rtf F5 the jumps go
    # inside, after each argument the aggregates' steps read (`MIN(CASE WHEN 1 THEN "c0" END)`)
    assert not any(re.search(r"CASE WHEN 1 THEN (COUNT|MIN|MAX)\(", s) for s in counted), counted
    c0 = next(c for c in profile.columns if c.name == "c0")
    assert (c0.null_fraction, c0.distinct_estimate, c0.min, c0.max) == (0.0, 3, "v0c0", "v2c0")


def _loop(sql: str) -> list[str]:
    """The opcodes of the scan loop (from the Rewind to its Next) of `sql` over `wide`."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE wide(id INTEGER PRIMARY KEY, {', '.join(f'{c} TEXT' for c in COLUMNS)})")
    ops = [row[1] for row in conn.execute(f"EXPLAIN {sql}")]
    conn.close()
    start = ops.index("Rewind")
    return ops[start : ops.index("Next", start)]


def test_calls_in_an_aggregate_are_followed_by_a_jump_in_the_scan_loop() -> None:
    calls = ", ".join(f"sum(length(upper({c})))" for c in [*COLUMNS, "id"])  # 27 calls
    sql = admit(f"SELECT {calls} FROM wide", "sqlite").sql
    loop = _loop(sql)
    # before: the CASE went around the SUM, coded after the loop; the nine steps ran back to back
    assert loop.count("AggStep") == 9 and loop.count("Goto") == 9, loop
    steps = [i for i, op in enumerate(loop) if op == "AggStep"]
    assert all("Goto" in loop[a:b] for a, b in pairwise(steps)), loop


def test_counts_do_not_make_a_query_of_sixteen_calls_many() -> None:
    calls = ", ".join(f"upper({c})" for c in COLUMNS * 2)  # 16 calls
    sql = f"SELECT {calls}, count(id), count(*), count(c0 IS NULL) FROM wide"  # `||`, `+` read c0: passes
    assert "CASE" not in admit(sql, "sqlite").sql  # before: 18 calls, every one wrapped
    # COUNT(DISTINCT c1) reads c1 (red team rtf F5: its argument is followed by a jump too)
    assert admit(sql.replace("count(id)", "count(DISTINCT c1)"), "sqlite").sql.count("CASE WHEN 1") == 17


def test_seventeen_nested_calls_are_still_wrapped() -> None:
    calls = ", ".join(f"length(upper({c}))" for c in (COLUMNS * 3)[:17])
    sql = admit(f"SELECT {calls} FROM wide", "sqlite").sql
    assert sql.count("CASE WHEN 1 THEN LENGTH(UPPER(") == 17, sql
    loop = _loop(sql)
    assert loop.count("Goto") >= 17, loop


def test_answers_are_unchanged_by_the_wrappers(wide: Path) -> None:
    calls = ", ".join(f"sum(length(upper({c}))), count({c}), min({c})" for c in COLUMNS)
    sql = f"SELECT {calls} FROM wide"
    rewritten = admit(sql, "sqlite").sql
    assert "SUM(CASE WHEN 1" in rewritten and "COUNT(CASE" not in rewritten
    conn = sqlite3.connect(wide)
    try:
        assert conn.execute(rewritten).fetchall() == conn.execute(sql).fetchall()
    finally:
        conn.close()
