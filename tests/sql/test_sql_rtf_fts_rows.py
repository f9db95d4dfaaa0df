"""Red team rtf F4 (every call is bounded, SQLite): a full-text query's passes were bounded, the
positions per row were not. FTS4's `a NEAR/10 a ...` of 10 phrases over one 5,000,000-token row ran
7.3 s inside one VM step (a 2 s call answered at 15.9 s); FTS5's NEAR of 10 phrases 6.2 s. The
profile now reads the most tokens a row holds and answers a timeout without starting such a query.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.service import SqlService

_TOKENS = 2_000_000  # 4 MB of `a `: 10 phrases over it ran 2.9 s (FTS4) in one step
_NEAR4 = " NEAR/10 ".join(["a"] * 10)
_NEAR5 = "NEAR(" + " ".join(["a"] * 10) + ", 10)"


@pytest.fixture(scope="module")
def big_row(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rtf_fts_rows") / "fts.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE d4 USING fts4(body)")
    conn.execute("CREATE VIRTUAL TABLE d5 USING fts5(body)")
    conn.execute("CREATE VIRTUAL TABLE small USING fts4(body)")
    conn.execute("CREATE VIEW v4 AS SELECT rowid AS id, body FROM d4")
    for table in ("d4", "d5"):
        conn.execute(f"INSERT INTO {table}(body) VALUES (?), ('a b c')", ("a " * _TOKENS,))
    conn.executemany("INSERT INTO small(body) VALUES (?)", [("a b " * 50,)] * 200)
    conn.commit()
    conn.close()
    return path


@pytest.fixture(params=[False, True], ids=["in_process", "isolated"])
def service(big_row: Path, request: pytest.FixtureRequest) -> Iterator[SqlService]:
    engine = SqlEngine(f"sqlite:///{big_row}", isolate=request.param)
    service = SqlService(engine, timeout_s=1.0)
    service.query("SELECT 1", call_id="rtf-f4-warm")  # a worker started, the row sizes read
    yield service
    engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT rowid FROM d4 WHERE d4 MATCH '{_NEAR4}'",
        f"SELECT id FROM v4 WHERE body MATCH '{_NEAR4}'",
        f"SELECT rowid FROM d5 WHERE d5 MATCH '{_NEAR5}'",
        f"SELECT rowid FROM d5('{_NEAR5}')",
        f"SELECT rowid FROM d5 WHERE d5 = '{_NEAR5}'",
    ],
    ids=["fts4_near_chain", "fts4_through_a_view", "fts5_near_group", "fts5_table_call", "fts5_equals"],
)
def test_rtf_f4_near_over_a_huge_row_times_out_before_it_runs(service: SqlService, sql: str) -> None:
    started, cpu = time.monotonic(), time.process_time()
    with pytest.raises(QueryTimeout):
        service.query(sql, call_id="rtf-f4")
    # before: the statement ran its one step (2-3 s here), in process or until the worker's kill
    assert time.monotonic() - started < 1.0
    assert time.process_time() - cpu < 0.5


def test_rtf_f4_full_text_queries_within_the_deadline_still_answer(service: SqlService) -> None:
    one_word = service.query("SELECT rowid FROM d4 WHERE d4 MATCH 'a' ORDER BY rowid", call_id="f4-ok")
    assert [r[0] for r in one_word[0].rows] == [1, 2]
    near = service.query(f"SELECT count(*) FROM small WHERE small MATCH '{_NEAR4}'", call_id="f4-small")
    assert near[0].rows[0][0] == 200  # the same NEAR chain over rows of 100 tokens
    mixed = service.query("SELECT rowid FROM d5 WHERE d5 MATCH 'NEAR(b c, 2)'", call_id="f4-two")
    assert [r[0] for r in mixed[0].rows] == [2]


def test_largest_row_reads_docsize_content_or_assumes_the_longest_value(tmp_path: Path) -> None:
    from mcpkit.sql.profiles import sqlite_fts_rows  # here: the other tests run on code without it

    conn = sqlite3.connect(tmp_path / "kinds.db")
    conn.executescript(
        """
        CREATE VIRTUAL TABLE f3 USING fts3(a, b);
        CREATE VIRTUAL TABLE f4 USING fts4(a, b);
        CREATE VIRTUAL TABLE m3 USING fts4(a, matchinfo=fts3);
        CREATE VIRTUAL TABLE f5 USING fts5(a, b);
        CREATE VIRTUAL TABLE n5 USING fts5(a, columnsize=0);
        CREATE VIRTUAL TABLE e5 USING fts5(a, content='', columnsize=0);
        """
    )
    for table in ("f3", "f4", "f5"):
        conn.execute(f"INSERT INTO {table} VALUES (?, ?), ('x', 'y')", ("x " * 70_000, "y " * 30_000))
    for table in ("m3", "n5", "e5"):
        conn.execute(f"INSERT INTO {table}(rowid, a) VALUES (1, ?)", ("x " * 70_000,))
    conn.commit()
    tables = sqlite_fts_rows.fts_tables(conn)
    assert tables == {"f3": 3, "f4": 3, "m3": 3, "f5": 5, "n5": 5, "e5": 5}

    def row(name: str) -> int:
        return sqlite_fts_rows.largest_row(conn, {name: tables[name]})

    assert row("f4") == row("f5") == 100_000  # %_docsize: the row's tokens, every column
    assert row("f3") == 200_000 and row("m3") == row("n5") == 140_000  # content: a token a character
    assert row("e5") == 32 * 1024 * 1024  # neither: the longest value SQLite reads
    assert sqlite_fts_rows.largest_row(conn, tables, frozenset({"e5"})) == 200_000  # withheld: skipped
    conn.close()


def test_the_row_sizes_are_read_whatever_functions_the_policy_admits(big_row: Path) -> None:
    from mcpkit.sql.admission.policy import FunctionPolicy

    engine = SqlEngine(f"sqlite:///{big_row}", isolate=False)
    engine.profile.use_function_policy(FunctionPolicy("sqlite", frozenset(), frozenset({"count"})))
    service = SqlService(engine, timeout_s=1.0)
    try:  # the reads run on a connection of their own: length() and max() need no admission
        rows = service.query("SELECT rowid FROM d4 WHERE d4 MATCH 'a' ORDER BY rowid", call_id="f4-policy")
        assert [r[0] for r in rows[0].rows] == [1, 2]
        with pytest.raises(QueryTimeout):
            service.query(f"SELECT rowid FROM d4 WHERE d4 MATCH '{_NEAR4}'", call_id="f4-policy-near")
    finally:
        engine.close()
