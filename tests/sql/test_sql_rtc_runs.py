"""Red team rtC (call bounds, SQLite, no masks): one row's passes over a large value.

F2-F4: one row's passes over a large value run back to back in one VM step, where no interrupt is
checked, in three shapes `interruptible_calls` did not split: many calls under one outer call (F3:
`abs(<150 x length(upper(t))>)`, only `abs` was followed by a jump), comparisons of two values, no
call at all (F4: 300 `t = t COLLATE NOCASE` ran 54 s under a 2 s timeout), and one JSON call of many
paths (F2: `json_extract(doc, <126 paths>)`, a pass over the document per path). Every run between
two jumps now holds at most 16 passes: the passes inside a wrapped call are followed by jumps of
their own, a comparison counts and is wrapped, a JSON path counts; a run that cannot be split is
refused.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission.admit import admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.service import SqlService


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path = tmp_path_factory.mktemp("rtc") / "big.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, t TEXT)")
    conn.execute("INSERT INTO big VALUES (1, ?), (2, 'ab')", ("x" * 12_000_000,))
    conn.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, doc TEXT)")
    conn.execute("INSERT INTO docs VALUES (1, ?)", (json.dumps({f"k{i}": i for i in range(1_000)}),))
    conn.execute("INSERT INTO docs VALUES (2, '{\"zz\": 1}')")
    conn.commit()
    conn.close()
    # 2 s: the call's timeout is also its analysis's wall-clock ceiling, on a loaded host
    service = SqlService(SqlEngine(f"sqlite:///{path}"), timeout_s=2.0)
    yield service
    service.engine.close()


def _sum(term: str, n: int) -> str:
    return " + ".join([term] * n)


@pytest.mark.parametrize(
    "sql",
    [
        # 300 and 250 passes over 12 MB: several seconds even on a quiet, fast host, so the 2 s
        # timeout is what ends them (rtC's 100 and 150 finished in about 2 s on a quiet one)
        f"SELECT abs({_sum('length(upper(t))', 300)}) AS n FROM big WHERE id = 1",  # F3
        f"SELECT {_sum('(t = t COLLATE NOCASE)', 250)} AS n FROM big WHERE id = 1",  # F4: no call
    ],
    ids=["outer_abs", "compare_nocase"],
)
def test_rtc_f2_f4_passes_in_one_row_stop_at_the_interrupt(big: SqlService, sql: str) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        big.query(sql, call_id="rtc-f3")
    # generous: the watchdog interrupts a second past the 2 s timeout; before, 10-40 s here
    assert time.monotonic() - started < 2.0 + 4.0


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT length(json_extract(doc, " + ", ".join(["'$.zz'"] * 126) + ")) AS n FROM docs",  # F2
        # F2b: paths that are no literal, and json_set's pairs
        "SELECT length(json_remove(doc, " + ", ".join(["t"] * 17) + ")) AS n FROM docs, big",
        "SELECT length(json_set(doc, " + ", ".join(f"'$.k{i}', 1" for i in range(17)) + ")) AS n FROM docs",
    ],
    ids=["json_126_paths", "json_remove_columns", "json_set_pairs"],
)
def test_rtc_f2_f4_a_run_that_cannot_be_split_is_refused(big: SqlService, sql: str) -> None:
    with pytest.raises(Refused) as info:
        big.query(sql, call_id="rtc-f2")
    assert info.value.data == {"reason": "too_complex"}


def test_rtc_f2_f4_small_rows_answer_as_written(big: SqlService) -> None:
    sql = (
        f"SELECT abs({_sum('length(upper(t))', 20)}) AS n, {_sum('(t = t COLLATE NOCASE)', 20)} AS c,"
        " json_extract(doc, '$.zz', '$.zz') AS j FROM big, docs WHERE big.id = 2 AND docs.id = 2"
        " AND big.id = docs.id"
    )
    sent = admit(sql, "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN LENGTH(") == 20 and "CASE WHEN 1 THEN t = t" in sent
    assert "big.id = docs.id" in sent  # a join's comparison of two columns is left as written
    assert big.query(sql, call_id="rtc-f3")[0].rows == [[40, 20, "[1,1]"]]


def test_rtc_f2_f4_conditions_concatenations_and_json_paths_are_split() -> None:
    where = " AND ".join(["t = t COLLATE NOCASE"] * 20)
    sent = admit(f"SELECT id FROM big WHERE id = 1 AND {where}", "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN t = t COLLATE NOCASE END") == 20 and "id = 1" in sent, sent
    # bare comparisons keep their index; past the limit the last are followed by a jump (review R6:
    # refused; rtI L2: wrapped, which lost the index)
    sent = admit("SELECT id FROM big WHERE id = 1 AND " + " AND ".join(["t = t"] * 17), "sqlite").sql
    assert sent.count("(t = t AND CASE WHEN 1 THEN 1 ELSE t = t END)") == 2, sent
    assert "WHERE id = 1 AND t = t" in sent and "THEN t = t" not in sent, sent
    sent = admit(f"SELECT {_sum('((t || t) IS NOT NULL)', 20)} AS n FROM big", "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN") == 20, sent
    paths = ", ".join(["'$.zz'"] * 16)  # 16 paths: 16 passes over the document, the most a run makes
    sent = admit("SELECT " + _sum(f"length(json_extract(doc, {paths}))", 12) + " FROM docs", "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN JSON_EXTRACT(") == 12, sent  # before: only each LENGTH


def test_rtc_f3_nested_runs_stay_within_sqlites_parser_stack(tmp_path: Path) -> None:
    calls = ", ".join(f"abs({_sum(f'length(upper(t{i}))', 20)})" for i in range(3))
    sql = f"SELECT {calls} FROM t"
    sent = admit(sql, "sqlite").sql
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE t (t0, t1, t2)")
    conn.execute("INSERT INTO t VALUES ('a', 'bb', 'ccc')")
    assert conn.execute(sent).fetchall() == conn.execute(sql).fetchall() == [(20, 40, 60)]
    conn.close()


def test_rtc_f5_f9_case_conditions_and_calls_over_literals_are_split() -> None:
    # F5: 300 WHEN t <> t COLLATE NOCASE, each a forward jump where SQLite checks no interrupt
    whens = " ".join(f"WHEN t <> t COLLATE NOCASE THEN {i}" for i in range(20))
    sent = admit(f"SELECT CASE {whens} ELSE 0 END AS n FROM big WHERE id = 1", "sqlite").sql
    assert sent.count("WHEN CASE WHEN 1 THEN t <> t COLLATE NOCASE END THEN") == 20, sent
    # F9: no column at all, 32 MB built and read four times per term
    terms = _sum("length(upper(hex(randomblob(16000000))))", 20)
    sent = admit(f"SELECT {terms} AS n", "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN LENGTH(") == 20, sent


def test_rtc_conversions_of_a_column_are_passes_too() -> None:
    # the class of F4: no call, a pass each (30 MB of digits: `t + 0` 0.4 s, CAST 0.15 s, `t = 1` 0.14 s)
    sent = admit(f"SELECT {_sum('(t + 0)', 20)} AS n FROM big WHERE id = 1", "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN t END + 0") == 20 and "id = 1" in sent, sent
    sent = admit(f"SELECT {_sum('CAST(t AS REAL)', 20)} AS n FROM big", "sqlite").sql
    assert sent.count("CAST(CASE WHEN 1 THEN t END AS REAL)") == 20, sent  # the CAST keeps its affinity
    sent = admit(f"SELECT {_sum('(t = 1)', 20)} AS n FROM big", "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN t = 1 END") == 20, sent
    # `IS NULL` reads no value: 20 of them stay as written
    sent = admit(f"SELECT {_sum('(t IS NULL)', 20)} AS n FROM big", "sqlite").sql
    assert "CASE" not in sent, sent
    # conditions an index may serve stay as written beside many wrapped calls
    calls = ", ".join(f"upper(t{i})" for i in range(17))
    sent = admit(f"SELECT {calls} FROM big WHERE id IN (SELECT id FROM docs) AND id = 1", "sqlite").sql
    assert sent.endswith("WHERE id IN (SELECT id FROM docs) AND id = 1"), sent
