"""Red team rtI F2 (SQLite under isolation): a worker that met the SQLite heap limit answered `resource`
and was given back, holding the heap its call grew (glibc keeps it): five idle workers kept 605 MB each
for the life of the server, and the next caller's call ran in that same process. A worker now ends
after a `resource` answer, or when it stays resident over `RETIRE_BYTES` above what it held once ready
(after returning glibc's free heap); the parent starts another."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService

# 300,000 sorted values of 500 bytes: past the 64 MiB heap of a pool of one, within a pool of five's
_SORT = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT {n})"
    " SELECT count(*) FROM (SELECT printf('%.500c', 'x') || n AS b FROM r ORDER BY b)"
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rti_workers") / "w.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    return path


@contextmanager
def _serving(db: Path, pool: int) -> Iterator[tuple[SqlEngine, SqlService]]:
    engine = SqlEngine(f"sqlite:///{db}", isolate=True, pool_size=pool)
    try:
        yield engine, SqlService(engine, timeout_s=20.0)
    finally:
        engine.close()


def _idle_pids(engine: SqlEngine) -> list[int]:
    assert engine.isolated is not None
    return [w.pid for w in engine.isolated._idle]


def _gone(pid: int) -> bool:
    for _ in range(100):  # the zygote reaps it at once (SIGCHLD ignored)
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.02)
    return False


def test_rti_f2_a_worker_that_met_the_heap_limit_serves_no_further_call(db: Path) -> None:
    with _serving(db, pool=1) as (engine, service):
        service.query("SELECT 1", call_id="f2-first")
        (first,) = _idle_pids(engine)
        with pytest.raises(QueryFailed) as info:
            service.query(_SORT.format(n=300_000), call_id="f2-heap")
        assert info.value.kind == "resource"
        assert first not in _idle_pids(engine)
        assert service.query("SELECT 2", call_id="f2-next")[0].rows == [[2]]
        assert first not in _idle_pids(engine)  # before: the same process, still holding its heap
        assert _gone(first)


def test_rti_f2_workers_stay_for_calls_that_give_their_heap_back(db: Path) -> None:
    with _serving(db, pool=5) as (engine, service):
        service.query("SELECT 1", call_id="f2-light")
        (first,) = _idle_pids(engine)
        assert service.query(_SORT.format(n=200_000), call_id="f2-sort")[0].rows == [[200_000]]
        for i in range(10):
            service.query(f"SELECT {i}", call_id="f2-light")
        assert _idle_pids(engine) == [first]  # no worker started per call
        assert engine.isolated is not None and engine.isolated.started == 1
        assert os.path.exists(f"/proc/{first}")
