"""Red team rtC F12 (taken by fix session fixf): SQLite's clipping wrapper read each column three times.

SQLite flattened the query into the wrapper, so `typeof()`, `substr()` and `length()` each evaluated
a computed column again: `substr(t, 1, 10)` over a 30 MB text held three copies (92 MB of SQLite's
heap where the query alone takes 32 MB), and a costly expression cost three times. The wrapper now
reads each column once, through `mcpkit_clip()`.
"""

from __future__ import annotations

import _sqlite3
import ctypes
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.sql.clipping import BinarySize, CellBudget
from mcpkit.sql.clipping import sqlite as clip
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService

_MB = 1_000_000
_BIG = 30 * _MB


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("rtf_clip") / "big.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, t TEXT)")
    conn.execute("INSERT INTO big (t) VALUES (?)", ("x" * _BIG,))
    conn.execute("CREATE TABLE mixed (id INTEGER PRIMARY KEY, v)")
    values: list[Any] = [7, 2.5, None, "short", "é" * 5000, "12345", b"\x00\x01\x02", b"", "", "ab" * 5000]
    conn.executemany("INSERT INTO mixed (id, v) VALUES (?, ?)", list(enumerate(values)))
    conn.commit()
    conn.close()
    return str(path)


@pytest.fixture(scope="module")
def service(big_db: str) -> Iterator[SqlService]:
    svc = SqlService(SqlEngine(f"sqlite:///{big_db}", isolate=False), timeout_s=20.0)
    yield svc
    svc.engine.close()


def _peak(service: SqlService, sql: str) -> int:
    lib = ctypes.CDLL(_sqlite3.__file__)
    lib.sqlite3_memory_highwater.restype = ctypes.c_int64
    lib.sqlite3_memory_highwater.argtypes = [ctypes.c_int]
    service.query("SELECT 1", call_id="warm", max_rows=1)
    lib.sqlite3_memory_highwater(1)
    result = service.query(sql, call_id="peak", max_rows=5)[0]
    assert result.rows, result
    return int(lib.sqlite3_memory_highwater(0))


def test_sqlite_clipping_evaluates_a_computed_column_once(service: SqlService) -> None:
    # Before: 92 MB (the 30 MB text loaded once for each of the wrapper's three readings).
    assert _peak(service, "SELECT substr(t, 1, 10) AS s FROM big") < 45 * _MB


def test_sqlite_clipping_reads_a_bare_column_once(service: SqlService) -> None:
    assert _peak(service, "SELECT t FROM big") < 45 * _MB


def test_sqlite_clipped_cells_keep_their_types(service: SqlService) -> None:
    rows = service.query("SELECT v FROM mixed ORDER BY id", call_id="types", max_rows=20)[0].rows
    cells = [r[0] for r in rows]
    assert cells[:4] == [7, 2.5, None, "short"]
    assert isinstance(cells[4], str) and 0 < len(cells[4]) < 5000 and set(cells[4]) == {"é", "."}
    assert cells[5] == "12345"  # text of digits stays text
    assert cells[6:9] == ["<binary 3 bytes>", "<binary 0 bytes>", ""]
    assert isinstance(cells[9], str) and len(cells[9]) == len(cells[4])  # cut at characters, not bytes


def test_sqlite_clip_plan_gives_blob_sizes(big_db: str) -> None:
    engine = SqlEngine(f"sqlite:///{big_db}", isolate=False)
    try:
        rows = engine.execute(
            "SELECT v FROM mixed WHERE id IN (0, 5, 6, 7) ORDER BY id LIMIT 5",
            None,
            4,
            5.0,
            "plan",
            clip=CellBudget(),
        ).rows
        assert [r[0] for r in rows] == [7, "12345", BinarySize(3), BinarySize(0)]
    finally:
        engine.close()


def test_sqlite_clip_function_in_python_matches_the_c_one(tmp_path: Path) -> None:
    # `register` falls back to a Python function where the C API handle is not known
    first = sqlite3.connect(tmp_path / "a.db")
    second = sqlite3.connect(tmp_path / "b.db")  # now the last opened: `first` has no handle
    try:
        clip.register(first)
        clip.register(second)
        for value in [7, 2.5, None, "short", "é" * 10, "日本語テキスト", "12345", b"\x00\x01", b"", ""]:
            sql = f"SELECT {clip.CLIP}(?, 4)"
            c_cell, py_cell = (
                second.execute(sql, (value,)).fetchone(),
                first.execute(sql, (value,)).fetchone(),
            )
            assert c_cell == py_cell, value
    finally:
        first.close()
        second.close()


def test_sqlite_isolated_worker_clips(big_db: str) -> None:
    svc = SqlService(SqlEngine(f"sqlite:///{big_db}", isolate=True), timeout_s=20.0)
    try:
        rows = svc.query("SELECT v FROM mixed WHERE id IN (0, 6) ORDER BY id", call_id="iso", max_rows=5)[
            0
        ].rows
        assert [r[0] for r in rows] == [7, "<binary 3 bytes>"]
        rows = svc.query("SELECT substr(t, 1, 3) AS s FROM big", call_id="iso2", max_rows=5)[0].rows
        assert rows[0][0] == "xxx"
    finally:
        svc.engine.close()
