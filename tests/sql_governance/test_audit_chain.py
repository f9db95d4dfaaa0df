"""`mcpkit audit --verify`: the hash chain shows a removed, changed or reordered entry; an anchor shows a
cut tail; two writers on one store still make one chain.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from mcpkit.cli import main as mcpkit_main
from mcpkit.sql.audit import AuditStore, open_store
from tests.sql_governance.test_audit import call_entries

Tamper = Callable[[sqlite3.Connection], None]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """An audit file with ten calls (twenty entries)."""
    path = tmp_path / "audit.db"
    store = open_store(path=path)
    for i in range(10):
        store.append(call_entries(i, sql=f"SELECT {i}"))
    store.close()
    return path


def _verify(path: Path, capsys: pytest.CaptureFixture[str], *anchors: str) -> tuple[int, str]:
    args = ["audit", "--audit", str(path), "--verify"]
    for anchor in anchors:
        args += ["--anchor", anchor]
    code = mcpkit_main(args)
    return code, capsys.readouterr().out


def _head(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert mcpkit_main(["audit", "--audit", str(path), "--head"]) == 0
    return capsys.readouterr().out.strip()


def _tamper(path: Path, change: Tamper) -> None:
    with sqlite3.connect(path) as db:
        change(db)
    db.close()


def _swap_entries(db: sqlite3.Connection) -> None:
    a, b = (db.execute("SELECT entry FROM mcpkit_audit WHERE seq = ?", [s]).fetchone()[0] for s in (7, 9))
    db.execute("UPDATE mcpkit_audit SET entry = ? WHERE seq = 7", [b])
    db.execute("UPDATE mcpkit_audit SET entry = ? WHERE seq = 9", [a])


def _swap_rows(db: sqlite3.Connection) -> None:
    db.execute("UPDATE mcpkit_audit SET seq = -1 WHERE seq = 7")
    db.execute("UPDATE mcpkit_audit SET seq = 7 WHERE seq = 8")
    db.execute("UPDATE mcpkit_audit SET seq = 8 WHERE seq = -1")


def _rehash_one(db: sqlite3.Connection) -> None:
    """Change an entry and recompute its own hash (but not the ones after it)."""
    from mcpkit.sql.audit.chain import link

    prev, entry = db.execute("SELECT prev, entry FROM mcpkit_audit WHERE seq = 6").fetchone()
    changed = entry.replace('"rows":2', '"rows":0')
    db.execute("UPDATE mcpkit_audit SET entry = ?, hash = ? WHERE seq = 6", [changed, link(prev, changed)])


TAMPERING: dict[str, tuple[Tamper, str]] = {
    "delete one in the middle": (
        lambda db: db.execute("DELETE FROM mcpkit_audit WHERE seq = 7"),
        "entries 7-7 are missing",
    ),
    "delete the first": (
        lambda db: db.execute("DELETE FROM mcpkit_audit WHERE seq = 1"),
        "does not start at entry 1",
    ),
    "delete a whole call and renumber": (
        lambda db: (
            db.execute("DELETE FROM mcpkit_audit WHERE seq IN (5, 6)"),
            db.execute("UPDATE mcpkit_audit SET seq = seq - 2 WHERE seq > 6"),
        ),
        "entry 5: its predecessor's hash does not match",
    ),
    "change the outcome in the entry": (
        lambda db: db.execute(
            "UPDATE mcpkit_audit SET entry = replace(entry, '\"OK\"', '\"REFUSED\"') WHERE seq = 4"
        ),
        "entry 4: its content does not match its hash",
    ),
    "change the rows and rehash that entry": (_rehash_one, "entry 7: its predecessor's hash does not match"),
    "the at column to garbage": (
        lambda db: db.execute("UPDATE mcpkit_audit SET at = 'garbage' WHERE seq = 5"),
        "entry 5: its indexed columns differ",
    ),
    "the at column to a number": (
        lambda db: db.execute("UPDATE mcpkit_audit SET at = 12 WHERE seq = 5"),
        "entry 5: its indexed columns differ",
    ),
    "the at column to a blob": (
        lambda db: db.execute("UPDATE mcpkit_audit SET at = x'00ff' WHERE seq = 5"),
        "entry 5: ",
    ),
    "the prev column to a blob": (
        lambda db: db.execute("UPDATE mcpkit_audit SET prev = x'00ff' WHERE seq = 10"),
        "entry 10: ",
    ),
    "change only an indexed column": (
        lambda db: db.execute("UPDATE mcpkit_audit SET tool = 'list_tables' WHERE seq = 3"),
        "entry 3: its indexed columns differ",
    ),
    "reorder two entries' contents": (_swap_entries, "entry 7: its content does not match its hash"),
    "reorder two rows": (_swap_rows, "entry 7: its predecessor's hash does not match"),
}


@pytest.mark.parametrize("name", list(TAMPERING))
def test_verify_finds_what_was_removed_changed_or_reordered(
    log: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert _verify(log, capsys) == (0, _verify(log, capsys)[1])
    assert "ok: 20 entries, chain intact" in _verify(log, capsys)[1]
    change, expected = TAMPERING[name]
    _tamper(log, change)
    code, out = _verify(log, capsys)
    assert code == 1 and expected in out, out
    assert all(line.startswith("BROKEN ") for line in out.splitlines())


def test_verify_of_a_dropped_table_reports_it_and_creates_nothing(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tamper(log, lambda db: db.execute("DROP TABLE mcpkit_audit"))
    code, out = _verify(log, capsys)
    assert code == 1 and out.startswith("BROKEN the audit table mcpkit_audit is missing"), out
    assert mcpkit_main(["audit", "--audit", str(log), "--head"]) == 2
    assert mcpkit_main(["audit", "--audit", str(log)]) == 2
    with sqlite3.connect(log) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)  # nothing created
    db.close()


def test_a_cut_tail_needs_an_anchor(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    anchor = _head(log, capsys)
    assert anchor.startswith("20:")
    _tamper(log, lambda db: db.execute("DELETE FROM mcpkit_audit WHERE seq > 16"))
    code, out = _verify(log, capsys)
    assert code == 0 and "ok: 16 entries" in out  # what a chain alone cannot show
    code, out = _verify(log, capsys, anchor)
    assert code == 1 and "anchor 20: the entry is missing (the log was cut back to 16)" in out


def test_a_rewritten_log_fails_its_anchor(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    anchor = _head(log, capsys)
    assert mcpkit_main(["audit", "--audit", str(log), "--verify", "--anchor", "20:not-a-hash"]) == 2
    capsys.readouterr()
    # rebuild the whole chain from a changed history: internally consistent, but not the anchored one
    with sqlite3.connect(log) as db:
        rows = db.execute("SELECT entry FROM mcpkit_audit ORDER BY seq").fetchall()
        db.execute("DELETE FROM mcpkit_audit")
    db.close()
    store = open_store(path=log)
    store.append([json.loads(e.replace('"rows":3', '"rows":0')) for (e,) in rows])
    store.close()
    code, out = _verify(log, capsys)
    assert code == 0  # consistent on its own ...
    code, out = _verify(log, capsys, anchor)
    assert code == 1 and "anchor 20: the entry's hash differs (the log was rewritten)" in out


def test_after_tampering_new_entries_do_not_heal_the_chain(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tamper(log, lambda db: db.execute("DELETE FROM mcpkit_audit WHERE seq = 3"))
    store = open_store(path=log)
    store.append(call_entries(99))
    store.close()
    code, out = _verify(log, capsys)
    assert code == 1 and "entries 3-3 are missing" in out


def test_two_writers_on_one_file_make_one_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.db"
    _race([open_store(path=path), open_store(path=path)], range(20))
    code, out = _verify(path, capsys)
    assert code == 0 and "ok: 80 entries" in out


def test_a_writer_opening_a_new_file_another_is_switching_to_wal_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The two-writers test failed once under load with "database is locked": a new file is in
    # rollback mode until one writer switches it to WAL, and SQLite answers the other's
    # `PRAGMA journal_mode=WAL` at once, without the busy wait, while that write lock is held.
    path = tmp_path / "audit.db"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the other writer, holding the new file's write lock
    waits: list[float] = []

    def wait(seconds: float) -> None:  # the writer waits: the other one finishes then
        waits.append(seconds)
        other.execute("COMMIT")

    monkeypatch.setattr(time, "sleep", wait)
    store = open_store(path=path)
    store.append(call_entries(1))  # before: OperationalError (database is locked)
    store.close()
    other.close()
    assert len(waits) == 1
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_two_writers_on_one_postgres_table_make_one_chain(
    pg_audit_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stores = [open_store(dsn=pg_audit_dsn), open_store(dsn=pg_audit_dsn)]
    stores[0].append(call_entries(0))  # the table exists before the race
    _race(stores, range(1, 30))
    code, out = _verify_dsn(pg_audit_dsn, capsys)
    assert code == 0 and "ok: 118 entries" in out


def _race(stores: list[AuditStore], calls: range) -> None:
    """Each store appends `calls` from its own thread at once; a writer's failure fails the test."""
    failures: list[BaseException] = []

    def write(store_index: int) -> None:
        try:
            for i in calls:
                stores[store_index].append(call_entries(store_index * 1000 + i))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert not failures, failures


def _verify_dsn(dsn: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = mcpkit_main(["audit", "--audit-dsn", dsn, "--verify"])
    return code, capsys.readouterr().out


def test_a_verify_in_progress_never_holds_up_the_server(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reader = open_store(path=log)
    rows = reader.chain()
    assert next(rows).seq == 1  # a long `--verify` holds its read transaction open
    writer = open_store(path=log)
    started = time.perf_counter()
    writer.append(call_entries(50))
    assert time.perf_counter() - started < 2.0  # not the 10 s busy timeout of a blocked writer
    rows.close()
    reader.close()
    writer.close()
    assert _verify(log, capsys)[0] == 0


def test_a_tool_column_written_before_names_were_escaped_still_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    store = open_store(path=path)
    store.append(call_entries(1, tool="odd\\name\u3164\n"))
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT tool FROM mcpkit_audit").fetchall() == [("odd\\\\name\\u3164\\n",)] * 2
        db.execute("UPDATE mcpkit_audit SET tool = ?", ["odd\\name\u3164\n"])  # as an older server wrote it
    db.close()
    assert _verify(path, capsys)[0] == 0
    _tamper(path, lambda db: db.execute("UPDATE mcpkit_audit SET tool = 'other' WHERE seq = 2"))
    code, out = _verify(path, capsys)
    assert code == 1 and "entry 2: its indexed columns differ" in out
