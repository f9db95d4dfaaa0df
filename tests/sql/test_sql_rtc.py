"""Red team rtC (call bounds, SQLite, no masks): findings turned into tests on the real engine.

F1: FTS5 holds the position list of each word of a full-text query in the row at once (about a byte
per occurrence): `a AND a AND ...` of 40 words over one 8,000,000-word row took 315 MB in one call,
110 words 860 MB, under a pass estimate of 40-110 (of 128). A query now reads at most
`MAX_FTS_READERS` words (`admission.bound_fts_queries.fts_readers`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
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
