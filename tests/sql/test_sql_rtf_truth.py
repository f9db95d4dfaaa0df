"""Red team rtf F3, F5, F7 (every call is bounded, SQLite): truth tests and aggregate steps were no pass.

SQLite reads a value tested for truth (`WHERE d AND d ...`, `NOT d`, `CASE WHEN d ...`) as a number,
a pass over the whole text; the AND/OR/CASE jumps between are forward ones, where no interrupt is
checked. 100 of them over 30 MiB of digits answered a 2 s call after 17 s, the thread running on.
A value tested for truth now counts as a pass, followed by a jump where a row holds over 16.

F5: the steps of a row's aggregates run back to back in the scan loop, each reading its argument
(`sum()` reads 30 MiB of digits as a number): 60 of them over distinct cursors answered a 2 s call
after 10 s. An aggregate's argument (not COUNT's) now counts, followed by a jump where a row holds
over 16: `SUM(CASE WHEN 1 THEN x END)`.

F7: arithmetic reads a scalar subquery's value as a number (60 `(SELECT d FROM d) + ...`: 12 s);
only a column operand was counted. A subquery operand now counts too.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.service import SqlService


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path = tmp_path_factory.mktemp("rtf_truth") / "d.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE d (id INTEGER PRIMARY KEY, d TEXT)")
    conn.execute("INSERT INTO d VALUES (1, ?)", ("1" * 30 * 1024 * 1024,))
    conn.execute("CREATE TABLE s (id INTEGER PRIMARY KEY, d TEXT)")
    conn.execute("INSERT INTO s VALUES (2, '0'), (3, '7')")
    conn.commit()
    conn.close()
    # 1.5 s: the call's timeout is also its analysis's wall-clock ceiling, on a loaded host
    service = SqlService(SqlEngine(f"sqlite:///{path}", isolate=False), timeout_s=1.5)
    yield service
    service.engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) AS n FROM d WHERE " + " AND ".join(["d"] * 100),  # F3
        "SELECT "
        + ", ".join(f"sum(t{i}.d)" for i in range(60))
        + " FROM "
        + ", ".join(f"d t{i}" for i in range(60)),  # F5
        "SELECT " + " + ".join(["(SELECT d FROM d)"] * 60) + " AS n",  # F7
    ],
    ids=["truth_tests", "aggregate_steps", "subquery_arithmetic"],
)
def test_rtf_f3_f5_passes_over_a_large_value_stop_at_the_interrupt(digits: SqlService, sql: str) -> None:
    started = time.process_time()  # CPU, not wall time: a loaded host only adds wall time
    with pytest.raises((QueryTimeout, Refused, QueryFailed)) as info:
        digits.query(sql, call_id="rtf-f3")
    if isinstance(info.value, Refused):  # a loaded host: the analysis met the call's wall-clock ceiling first
        assert "analysis budget" in info.value.message
    if isinstance(info.value, QueryFailed):  # 60 copies of a 30 MB value may meet the heap limit first
        assert info.value.kind == "resource"
    # generous: the watchdog interrupts a second past the timeout; before, 10-17 s and the thread ran on
    assert time.process_time() - started < 1.5 + 4.0


def test_rtf_f3_truth_tests_answer_as_written(digits: SqlService) -> None:
    where = " AND ".join(["d"] * 20)
    rows = digits.query(f"SELECT id FROM s WHERE {where} ORDER BY id", call_id="rtf-f3-ok")[0].rows
    assert [list(r) for r in rows] == [[3]]
    case = "CASE " + " ".join(["WHEN NOT d THEN 'no'"] * 20) + " ELSE 'yes' END"
    rows = digits.query(f"SELECT id, {case} AS t FROM s ORDER BY id", call_id="rtf-f3-case")[0].rows
    assert [list(r) for r in rows] == [[2, "no"], [3, "yes"]]
    sums = ", ".join(f"sum(t{i}.d)" for i in range(20))
    result = digits.query(
        f"SELECT {sums}, count(*) FROM "
        + ", ".join(f"s t{i}" for i in range(20))
        + " WHERE "
        + " AND ".join(f"t{i}.id = 3" for i in range(20)),
        call_id="rtf-f5-ok",
    )[0]
    assert [list(r) for r in result.rows] == [[7] * 20 + [1]]
    assert list(result.columns)[:2] == ["SUM(t0.d)", "SUM(t1.d)"]  # as without the jumps
