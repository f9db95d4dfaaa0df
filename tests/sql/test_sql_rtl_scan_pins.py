"""Scan pins on SQLite tables with no rowid order or no storage of their own.

Red team rtL F2: `NOT INDEXED` on a WITHOUT ROWID table still let SQLite 3.40 scan a covering index
over the masked e-mail (`SCAN customers USING COVERING INDEX ix`): rows came back in e-mail order.
Such a table is now sent `INDEXED BY` its primary key's index (its stored order).
Red team rtI L3: an FTS5 table over a masked column stopped `serve --mask` as "Cannot connect":
the pins ran `PRAGMA table_info` on the virtual table the masks withhold. A virtual table gets no pin.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlglot

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import enforce_masks, ordered_schema, prepare_masks
from mcpkit.sql.masking.scan_pins import pin_scans
from mcpkit.sql.profiles.sqlite_scan_pins import sqlite_scan_pins
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import rows_or_message

_SPELLINGS = ["bob", "Bob", "bOb", "boB", "BOb", "BoB", "bOB", "BOB"]
_EMAILS = ["e5", "e4", "e6", "e8", "e1", "e2", "e7", "e3"]


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rtl_pins")
    con = sqlite3.connect(folder / "p.db")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT, name TEXT) WITHOUT ROWID")
    con.execute("CREATE INDEX ix ON t (email, name)")
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [(i + 1, e, s) for i, (e, s) in enumerate(zip(_EMAILS, _SPELLINGS, strict=True))],
    )
    con.execute("CREATE VIRTUAL TABLE docs USING fts5(email, body)")
    con.execute("INSERT INTO docs VALUES ('e1', 'hello')")
    con.commit()
    con.close()
    (folder / "masks.yaml").write_text("masks:\n  - t.email\n  - docs.email\n", encoding="utf-8")
    return folder


def test_a_without_rowid_table_is_read_along_its_key(path: Path) -> None:
    engine = SqlEngine(f"sqlite:///{path / 'p.db'}", isolate=False)
    try:
        with engine._sa.connect() as conn:
            pins, _ = sqlite_scan_pins(conn, {"t": frozenset({"email"})})
    finally:
        engine.close()
    tree = sqlglot.parse_one("SELECT id, name FROM t", read="sqlite")
    assert pin_scans(tree, pins)
    sent = tree.sql("sqlite")
    con = sqlite3.connect(path / "p.db")
    try:
        plan = [str(r[3]) for r in con.execute("EXPLAIN QUERY PLAN " + sent)]
        assert plan == ["SCAN t"], (sent, plan)
        assert [r[0] for r in con.execute(sent)] == list(range(1, 9))
    finally:
        con.close()


@pytest.fixture(scope="module")
def service(path: Path) -> Iterator[SqlService]:
    engine = SqlEngine(f"sqlite:///{path / 'p.db'}")
    try:
        policy, reflection, masked = prepare_masks(engine, str(path / "masks.yaml"))
        enforce_masks(engine, masked)
        known = ordered_schema(engine, reflection, policy, masked, ())  # raised: vtable constructor failed
    except BaseException:
        engine.close()
        raise
    try:
        yield SqlService(engine, max_rows=50, timeout_s=10.0, masking=Masking(policy, known, masked))
    finally:
        engine.close()


def test_an_fts5_table_over_a_masked_column_is_served_and_refused(service: SqlService) -> None:
    got = rows_or_message(service, "SELECT body FROM docs WHERE docs MATCH 'hello'")
    assert isinstance(got, str), got
    assert rows_or_message(service, "SELECT id, email FROM t WHERE id = 1") == [[1, "<masked>"]]
