"""Red team rtf (every call is bounded, SQLite): comparisons `interruptible_calls` did not count.

F1: a simple CASE (`CASE a WHEN b THEN ...`) compares its base to each WHEN value with no jump
between; sqlglot writes no comparison node for it, so none counted: 200 WHENs over two 30 MiB texts
ran 52 s under a 2 s timeout. Past the limit a simple CASE is now written out as comparisons
(`CASE WHEN a = b THEN ...`, what SQLite compares anyway), each followed by a jump.

F2: a row-value comparison `(a, a, ...) = (a, ..., b)` counted as one comparison; SQLite compares
every pair. Each pair now counts; a comparison of over 16 pairs of values is refused.

Found on the way (fix session fixf): a call in a CASE's ELSE (or its base) was never counted.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.service import SqlService

_N = 30 * 1024 * 1024


@pytest.fixture(scope="module")
def cmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path = tmp_path_factory.mktemp("rtf_runs") / "cmp.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, a TEXT, b TEXT)")
    conn.execute("INSERT INTO u VALUES (1, ?, ?), (2, 'a', 'b')", ("x" * _N, "x" * (_N - 1) + "z"))
    conn.commit()
    conn.close()
    # 1.5 s: the call's timeout is also its analysis's wall-clock ceiling, on a loaded host
    service = SqlService(SqlEngine(f"sqlite:///{path}", isolate=False), timeout_s=1.5)
    yield service
    service.engine.close()


def _whens(n: int) -> str:
    return " ".join(["WHEN b THEN 1"] * n)


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT CASE a {_whens(150)} END AS n FROM u WHERE id = 1",  # F1: 52 s for 200 WHENs
        "SELECT " + " + ".join(["CASE WHEN id = 0 THEN 0 ELSE length(upper(a)) END"] * 100) + " AS n FROM u",
    ],
    ids=["simple_case", "else_calls"],
)
def test_rtf_f1_one_row_of_comparisons_stops_at_the_interrupt(cmp: SqlService, sql: str) -> None:
    started = time.process_time()  # CPU, not wall time: a loaded host only adds wall time
    with pytest.raises((QueryTimeout, Refused)) as info:
        cmp.query(sql, call_id="rtf-f1")
    if isinstance(info.value, Refused):  # a loaded host: the analysis met the call's wall-clock ceiling first
        assert "analysis budget" in info.value.message
    # generous: the watchdog interrupts a second past the 1.5 s timeout
    assert time.process_time() - started < 1.5 + 4.0


def test_rtf_f1_a_simple_case_answers_as_written(cmp: SqlService) -> None:
    sql = (
        "SELECT id, CASE b "
        + " ".join(f"WHEN 'k{i}' THEN {i}" for i in range(20))
        + " WHEN 'b' THEN -1 END AS n"
    )
    result = cmp.query(f"{sql} FROM u WHERE id = 2", call_id="rtf-f1-answer")[0]
    assert [list(r) for r in result.rows] == [[2, -1]]
    assert list(result.columns) == ["id", "n"]


def test_rtf_f2_a_row_value_comparison_of_many_pairs_is_refused(cmp: SqlService) -> None:
    left, right = ", ".join(["a"] * 100), ", ".join(["a"] * 99 + ["b"])
    with pytest.raises(Refused) as info:
        cmp.query(f"SELECT ({left}) = ({right}) AS n FROM u WHERE id = 1", call_id="rtf-f2")
    assert info.value.data == {"reason": "too_complex"}


def test_rtf_f2_short_row_values_answer(cmp: SqlService) -> None:
    result = cmp.query(
        "SELECT id FROM u WHERE (id, b) = (2, 'b') OR (id, a) < (0, 'a')", call_id="rtf-f2-ok"
    )[0]
    assert [list(r) for r in result.rows] == [[2]]


_UPPERS = ", ".join(f"upper(a) AS u{i}" for i in range(16))
_THREE = "WHEN 0 THEN 0 WHEN 1 THEN 1 WHEN 2 THEN 2 END"


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT CASE abs(random()) % 3 {_THREE} AS r, {_UPPERS} FROM u WHERE id = 2",
        # SQLite flattens the subquery: each reading of r computes random() again
        f"SELECT CASE r {_THREE} AS r, {_UPPERS} FROM (SELECT abs(random()) % 3 AS r, a FROM u WHERE id = 2)",
    ],
    ids=["random_base", "random_column"],
)
def test_review_r1_a_random_case_base_is_not_computed_per_when(cmp: SqlService, sql: str) -> None:
    # written out as `CASE WHEN base = 0 ... WHEN base = 1 ...`, the base was computed for each WHEN:
    # the CASE over 0, 1, 2 answered NULL about one row in three
    with pytest.raises(Refused) as info:
        cmp.query(sql, call_id="r1")
    assert info.value.data == {"reason": "too_complex"}
    assert "random value" in info.value.message


def test_review_r1_a_simple_case_beside_random_elsewhere_answers(cmp: SqlService) -> None:
    sql = f"SELECT CASE b WHEN 'b' THEN 1 END AS n, {_UPPERS}, random() AS z FROM u WHERE id = 2"
    rows = cmp.query(sql, call_id="r1-ok")[0].rows
    assert [list(r)[:3] for r in rows] == [[1, "A", "A"]]
