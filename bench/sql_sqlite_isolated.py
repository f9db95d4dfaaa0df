"""What running SQLite statements in killable worker processes costs (`mcpkit.sql.engines.isolated`).

    python bench/sql_sqlite_isolated.py [--calls 200]

Times `SqlEngine.execute` (the service's cell clipping on, as `execute_query` runs it) in process
(`isolate=False`) and in a worker (`isolate=True`) for `SELECT 1` and a 500-row, 4-column query
(median per call, after a warm-up), and the start of a worker: the fork server's first start
(a new interpreter importing mcpkit) and a worker forked from it, opened and answering (median of 10).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from contextlib import closing
from pathlib import Path

from mcpkit.sql.clipping import CellBudget
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.engines.isolated import IsolatedSqlite

_QUERIES = {"SELECT 1": ("SELECT 1", 1), "500 rows": ("SELECT id, name, v, note FROM t ORDER BY id", 500)}


def _per_call_ms(engine: SqlEngine, sql: str, limit: int, calls: int) -> float:
    for _ in range(5):
        engine.execute(sql, None, limit, 10.0, "warm", clip=CellBudget())
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        engine.execute(sql, None, limit, 10.0, "bench", clip=CellBudget())
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.db"
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v REAL, note TEXT)")
            rows = [
                (i, f"name {i}", i * 0.5, "a note of some forty characters, roughly") for i in range(5000)
            ]
            conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
            conn.commit()
        url = f"sqlite:///{path}"
        started = time.perf_counter()
        isolated = SqlEngine(url, isolate=True)
        isolated.execute("SELECT 1", None, 1, 120.0, "first")
        first_s = time.perf_counter() - started
        inprocess = SqlEngine(url, isolate=False)
        print(
            f"first call of a fresh process (fork server start + its imports + one worker): {first_s:.2f} s"
        )
        print("| query | in process | in a worker | ratio |")
        print("| --- | ---: | ---: | ---: |")
        for name, (sql, limit) in _QUERIES.items():
            a = _per_call_ms(inprocess, sql, limit, args.calls)
            b = _per_call_ms(isolated, sql, limit, args.calls)
            print(f"| {name} | {a:.2f} ms | {b:.2f} ms | {b / a:.1f}x |")
        workers = isolated.isolated
        assert isinstance(workers, IsolatedSqlite)
        starts = []
        for _ in range(10):
            began = time.perf_counter()
            worker = workers._start()
            starts.append(time.perf_counter() - began)
            worker.kill()
        median_ms = statistics.median(starts) * 1000
        print(f"worker start (fork, open the database, profile set-up), median of 10: {median_ms:.0f} ms")
        isolated.close()
        inprocess.close()


if __name__ == "__main__":
    main()
