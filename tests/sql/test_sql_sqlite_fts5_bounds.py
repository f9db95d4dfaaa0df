"""FTS5's snippet(), highlight() and bm25() ask the call's deadline first (red team rt35c F1).

Each runs in one VM step per row, where neither the progress handler nor `sqlite3_interrupt`
reach: snippet() over a 20,000-word row with 36 phrases answered a 2 s call after 17 s and burned
53 s of CPU. They are now FTS5's own behind a wrapper that estimates the work from the sizes FTS5
knows (phrases, tokens, instances, bytes) and refuses, as a timeout, work that would end more than
a second past the deadline. Also two SQLite answers of the same round: trims with a set that is not
UTF-8 (L2) and the sentence for a whole-file check (L5).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.profiles.sqlite import SqliteProfile
from mcpkit.sql.profiles.sqlite_text import bound_text_functions, call_deadline
from mcpkit.sql.service import SqlService

_COMMON = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "it",
    "that",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
]
_NINE = " OR ".join(f"{p}*" for p in ["t", "o", "a", "i", "w", "f", "h", "b", "x"])


@pytest.fixture(scope="module")
def fts_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fts5") / "fts.db"
    rng = random.Random(1)
    chapter = " ".join(f"{rng.choice(_COMMON)} x{rng.randint(0, 9999)}" for _ in range(10000))
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE VIRTUAL TABLE docs USING fts5(title, body);"
        "CREATE VIRTUAL TABLE snip USING fts5(body); CREATE VIRTUAL TABLE hl USING fts5(body);"
        "CREATE VIRTUAL TABLE bm USING fts5(body);"
    )
    conn.executemany(
        "INSERT INTO docs VALUES (?, ?)",
        [("chapter 1", chapter), ("short", "the quick brown fox. The lazy dog: a cat"), ("none", "x")],
    )
    for table, tokens in (("snip", 3000), ("hl", 30000), ("bm", 40000)):
        conn.execute(f"INSERT INTO {table} VALUES (?)", (" ".join(["a"] * tokens),))
    conn.commit()
    conn.close()
    return path


def _connect(path: Path) -> sqlite3.Connection:
    connect = SqliteProfile().engine_options(make_url(f"sqlite:///{path}"))["creator"]
    conn: sqlite3.Connection = connect()
    return conn


def _cpu_s() -> float:
    with open(f"/proc/{os.getpid()}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize(
    "sql",
    [
        # 24,000 instances scored pairwise (about 2.5 s of CPU, one step)
        "SELECT snippet(snip, 0, '[', ']', '...', 64) FROM snip WHERE snip MATCH "
        + repr(" OR ".join(["a"] * 8)),
        # 30,000 matches, the result rebuilt at each (about 1 s)
        f"SELECT length(highlight(hl, 0, '{'<' * 60}', '>')) FROM hl WHERE hl MATCH 'a'",
        # the instance list of 120 phrases over 40,000 tokens (about 1.5 s)
        "SELECT bm25(bm) FROM bm WHERE bm MATCH " + repr(" OR ".join(["a"] * 120)),
        "SELECT rowid FROM bm WHERE bm MATCH " + repr(" OR ".join(["a"] * 120)) + " ORDER BY rank",
    ],
    ids=["snippet", "highlight", "bm25", "rank"],
)
def test_fts5_auxiliary_work_past_the_deadline_is_refused_before_it_starts(fts_db: Path, sql: str) -> None:
    conn = _connect(fts_db)
    try:
        call_deadline(time.monotonic() + 0.5)
        cpu = time.process_time()
        with pytest.raises(sqlite3.OperationalError) as info:
            conn.execute(sql).fetchall()
        assert time.process_time() - cpu < 0.5  # refused from the sizes, not stopped midway
        # ORDER BY rank words any error of its function "SQL logic error": still a timeout
        assert SqliteProfile().classify(info.value) == "timeout"
        call_deadline(None)
        assert conn.execute("SELECT count(*) FROM snip WHERE snip MATCH 'a'").fetchone() == (1,)
    finally:
        call_deadline(None)
        conn.close()


_SAME = [
    "SELECT title, snippet(docs, 1, '[', ']', '...', 10) FROM docs WHERE docs MATCH 'the' ORDER BY rowid",
    "SELECT snippet(docs, -1, '[', ']', '…', 5) FROM docs WHERE docs MATCH 'x1* OR short' ORDER BY rowid",
    "SELECT title, highlight(docs, 0, '<', '>'), bm25(docs) FROM docs WHERE docs MATCH 'quick OR chapter'"
    " ORDER BY rank",
    "SELECT rowid, rank, bm25(docs, 2.0, 0.5) FROM docs WHERE docs MATCH 'the fox' ORDER BY rank",
    "SELECT highlight(docs, 1, NULL, 7) FROM docs WHERE docs MATCH 'lazy'",
    "SELECT snippet(docs, 1, '[', ']', '...', 64) FROM docs WHERE docs MATCH '\"the quick\" NEAR cat'",
    "SELECT length(highlight(hl, 0, '[', ']')) FROM hl WHERE hl MATCH 'a'",
    "SELECT highlight(docs, 9, '[', ']') FROM docs WHERE docs MATCH 'the'",
]
_ERRORS = [
    "SELECT highlight(docs, 1) FROM docs WHERE docs MATCH 'the'",
    "SELECT snippet(docs, 1, '[', ']') FROM docs WHERE docs MATCH 'the'",
]


def test_fts5_auxiliary_functions_answer_as_fts5s_own(fts_db: Path) -> None:
    conn, plain = _connect(fts_db), sqlite3.connect(fts_db)
    try:
        call_deadline(time.monotonic() + 10)
        for sql in _SAME:
            assert conn.execute(sql).fetchall() == plain.execute(sql).fetchall(), sql
        for sql in _ERRORS:
            with pytest.raises(sqlite3.Error) as ours:
                conn.execute(sql).fetchall()
            with pytest.raises(sqlite3.Error) as theirs:
                plain.execute(sql).fetchall()
            assert str(ours.value) == str(theirs.value)
    finally:
        call_deadline(None)
        conn.close()
        plain.close()


def test_fts5_auxiliary_functions_refuse_where_fts5_cannot_be_read(
    fts_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcpkit.sql.profiles import sqlite_fts5  # here: the other tests run on code without it

    monkeypatch.setattr(sqlite_fts5, "_originals", lambda _fts5, _db: None)
    conn = _connect(fts_db)
    try:
        for name, args in (("snippet", "0, '[', ']', '', 5"), ("highlight", "0, '[', ']'"), ("bm25", "")):
            with pytest.raises(sqlite3.OperationalError, match="unavailable"):
                conn.execute(
                    f"SELECT {name}(snip{', ' if args else ''}{args}) FROM snip WHERE snip MATCH 'a'"
                )
    finally:
        conn.close()


def test_rt35c_f1_many_phrases_snippet_ends_within_the_deadline(fts_db: Path) -> None:
    # 16 phrases (admission's most words) over the 20,000-token chapter: about 5.5 s of CPU in one
    # step (18: 7 s, 36: about 50 s)
    sql = (
        "SELECT title, snippet(docs, 1, '[', ']', '...', 64) FROM docs WHERE docs MATCH '"
        + " OR ".join([_NINE] * 2).rsplit(" OR ", 2)[0]
        + "'"
    )
    service = SqlService(SqlEngine(f"sqlite:///{fts_db}"), timeout_s=1.0)
    try:
        cpu, started = _cpu_s(), time.monotonic()
        with pytest.raises(QueryTimeout):
            service.query(sql, call_id="rt35c-f1")
        # generous: the bound is the deadline plus 1.5 s; before, 7 s here and 17 s at 36 phrases
        assert time.monotonic() - started < 1.0 + 3.5
        assert _cpu_s() - cpu < 1.0 + 3.5
    finally:
        service.engine.close()


def test_rt35c_l2_trims_with_a_set_that_is_not_utf8_answer_as_sqlites_own() -> None:
    # `rtrim(x'00ff', x'ff')` failed ("the operator log has the details"); SQLite answers x'00'
    conn = sqlite3.connect(":memory:")
    bound_text_functions(conn, 32 * 1024 * 1024)  # on the C API: the connection last opened
    plain = sqlite3.connect(":memory:")
    rng = random.Random(7)
    alphabet = [
        b"\x00",
        b"a",
        b"\x80",
        b"\xbf",
        b"\xc3",
        b"\xc3\xa9",
        b"\xe2\x82",
        b"\xf0",
        b"\xff",
        b"\xff\x80",
    ]
    cases = [(b"\x00\xff", b"\xff"), (b"\xff\x41\xff", b"\xff"), (b"a\xff\x80\xff", b"\xff\x80")]
    for _ in range(200):
        text = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        chars = b"".join(rng.choice(alphabet[1:]) for _ in range(rng.randint(1, 4)))
        cases.append((text, chars + (b"\xff" if rng.random() < 0.5 else b"")))
    try:
        for text, chars in cases:
            for name in ("trim", "ltrim", "rtrim"):
                for cast in ("", "CAST(? AS TEXT)"):
                    arg = cast or "?"
                    sql = f"SELECT hex({name}({arg}, CAST(? AS TEXT)))"
                    assert (
                        conn.execute(sql, (text, chars)).fetchone()
                        == plain.execute(sql, (text, chars)).fetchone()
                    ), (name, text, chars)
    finally:
        conn.close()
        plain.close()


def test_rt35c_l5_whole_file_checks_are_a_withheld_read_not_a_change(fts_db: Path) -> None:
    # each checks the whole file in one step, so it stays refused; the sentence said "a change"
    service = SqlService(SqlEngine(f"sqlite:///{fts_db}"), timeout_s=2.0)
    try:
        for sql in ("SELECT * FROM pragma_integrity_check", "SELECT * FROM pragma_quick_check(5)"):
            with pytest.raises(QueryFailed) as info:
                service.query(sql, call_id="rt35c-l5")
            assert info.value.data is not None and info.value.data["reason"] == "permission"
    finally:
        service.engine.close()
