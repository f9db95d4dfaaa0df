"""Red team rtC (call bounds, SQLite, no masks): findings turned into tests on the real engine.

F1: FTS5 holds the position list of each word of a full-text query in the row at once (about a byte
per occurrence): `a AND a AND ...` of 40 words over one 8,000,000-word row took 315 MB in one call,
110 words 860 MB, under a pass estimate of 40-110 (of 128). A query now reads at most
`MAX_FTS_READERS` words (`admission.bound_fts_queries.fts_readers`).

F6: FTS3/4's snippet() and offsets() run in one VM step with no wrapper (only FTS5's are bounded):
an FTS4 snippet of 32 phrases over a 1,000,000-word row answered a 2 s call after 11.7 s, offsets()
of 64 phrases after 9 s. offsets() (FTS3/4 only) is never allowed; snippet() is refused by the
authorizer where the database holds an FTS3/4 table (no API reaches their function), as a
permission failure, not as a write.

F11: FTS5 answers `body LIKE '%...%'` / GLOB on a trigram table's column as a phrase query, before
like() checks the pattern's 64-byte limit: 200 characters ran 2.7 s and took 200 MB, then failed. A
literal pattern past the limit is refused before the query runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService


@pytest.fixture(scope="module")
def fts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path = tmp_path_factory.mktemp("rtc") / "fts.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE VIRTUAL TABLE docs USING fts5(title, body);"
        "CREATE VIRTUAL TABLE tri USING fts5(body, tokenize='trigram');"
    )
    conn.execute("INSERT INTO docs VALUES ('long', ?)", ("a " * 100_000,))
    conn.execute("INSERT INTO docs VALUES ('short', 'the quick brown fox jumps over the lazy dog a')")
    conn.execute("INSERT INTO tri VALUES ('the quick brown fox jumps over the lazy dog')")
    conn.commit()
    conn.close()
    service = SqlService(SqlEngine(f"sqlite:///{path}"), timeout_s=2.0)
    yield service
    service.engine.close()


def _and(word: str, n: int) -> str:
    return " AND ".join([word] * n)


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT rowid FROM docs WHERE docs MATCH '{_and('a', 40)}'",  # the repro: 40 passes, 40 lists
        f"SELECT rowid FROM docs WHERE docs MATCH '{' OR '.join(['a'] * 17)}'",
        f"SELECT rowid FROM docs WHERE docs MATCH '{' '.join(['a*'] * 17)}'",  # prefixes, implicit AND
        "SELECT rowid FROM docs WHERE docs MATCH '\"" + " ".join(["a"] * 30) + "\"'",  # a phrase: 113 passes
        f"SELECT rowid FROM docs WHERE docs = '{_and('a', 17)}'",
        f"SELECT rowid FROM docs('{_and('body: a', 17)}')",
    ],
    ids=["and40", "or17", "prefix17", "phrase30", "equals", "called"],
)
def test_rtc_f1_full_text_queries_of_many_words_are_refused(fts: SqlService, sql: str) -> None:
    with pytest.raises(Refused) as info:
        fts.query(sql, call_id="rtc-f1")
    assert info.value.data == {"reason": "too_complex"}
    assert "words" in str(info.value)


def test_rtc_f1_full_text_queries_of_a_few_words_answer(fts: SqlService) -> None:
    cases = {
        f"SELECT rowid FROM docs WHERE docs MATCH '{_and('a', 16)}' ORDER BY rowid": [[1], [2]],
        "SELECT rowid FROM docs WHERE docs MATCH '\"the quick brown fox jumps over the lazy dog\"'": [[2]],
        "SELECT rowid FROM docs WHERE docs MATCH 'title: short AND NEAR(quick fox, 3)'": [[2]],
        "SELECT rowid FROM docs WHERE docs MATCH 'nearby OR lazy'": [[2]],
        "SELECT rowid FROM tri WHERE tri MATCH 'brown fox'": [[1]],
    }
    for sql, rows in cases.items():
        assert fts.query(sql, call_id="rtc-f1")[0].rows == rows, sql


def test_rtc_f6_fts4_snippet_and_offsets_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "fts4.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE t4 USING fts4(body)")
    conn.execute("INSERT INTO t4 VALUES ('a b c a')")
    conn.commit()
    conn.close()
    service = SqlService(SqlEngine(f"sqlite:///{path}"), timeout_s=2.0)
    try:
        with pytest.raises(Refused) as refused:
            service.query("SELECT offsets(t4) FROM t4 WHERE t4 MATCH 'a'", call_id="rtc-f6")
        assert refused.value.data == {"reason": "function"}
        for sql in (
            "SELECT snippet(t4) FROM t4 WHERE t4 MATCH 'a OR b'",
            "SELECT snippet(t4, '[', ']', '...', -1, 64) FROM t4 WHERE t4 MATCH 'a'",
        ):
            with pytest.raises(QueryFailed) as failed:
                service.query(sql, call_id="rtc-f6")
            assert failed.value.data is not None and failed.value.data["reason"] == "permission"
        # what stays: the table's rows and matchinfo (measured linear)
        sql = "SELECT rowid, length(matchinfo(t4)) FROM t4 WHERE t4 MATCH 'a'"
        assert service.query(sql, call_id="rtc-f6")[0].rows == [[1, 20]]
    finally:
        service.engine.close()


def test_rtc_f6_fts5_snippet_answers_where_no_fts3_table_is(fts: SqlService) -> None:
    sql = "SELECT snippet(docs, 1, '[', ']', '', 3) FROM docs WHERE docs MATCH 'lazy'"
    assert fts.query(sql, call_id="rtc-f6")[0].rows == [["the [lazy] dog"]]


def test_rtc_f11_a_like_pattern_past_sqlites_limit_is_refused_before_fts5_reads_it(fts: SqlService) -> None:
    for sql in (
        "SELECT rowid FROM tri WHERE body LIKE '%" + "a" * 200 + "%'",
        "SELECT rowid FROM tri WHERE body GLOB '*" + "é" * 32 + "*'",  # 64 characters, 65 bytes and more
    ):
        with pytest.raises(Refused) as info:
            fts.query(sql, call_id="rtc-f11")
        assert info.value.data == {"reason": "too_complex"}
    sql = "SELECT rowid FROM tri WHERE body LIKE '%" + "quick brown fox"[:62] + "%'"
    assert fts.query(sql, call_id="rtc-f11")[0].rows == [[1]]
    from mcpkit.sql.admission.bound_fts_queries import LIKE_PATTERN_BYTES  # here: not in the old code
    from mcpkit.sql.profiles.sqlite_text import LIKE_PATTERN_LENGTH

    assert LIKE_PATTERN_BYTES == LIKE_PATTERN_LENGTH
