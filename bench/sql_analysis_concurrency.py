"""Concurrent heavy analyses and a cheap caller's latency (red team rt33a F3).

    python bench/sql_analysis_concurrency.py [--heavy 6] [--branches 300]
    PYTHONPATH=/tmp/old/src python bench/sql_analysis_concurrency.py   # another checkout's src

`--heavy` threads each run one valid CASE query of `--branches` branches through `SqlService.query`
(SQLite demo database, no plan cache, the default 5 s budget) while another thread runs
`SELECT 1` every 0.2 s. Prints each heavy call's answer and wall time, and the probe's worst and
median latency.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "src"))  # PYTHONPATH comes first

from mcpkit.errors import Refused
from mcpkit.sql.demo import write_demo_sqlite
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService


def _heavy(branches: int, tag: int) -> str:
    cases = " ".join(f"WHEN region || product = 'a{i}' || '{tag}' THEN {i}" for i in range(branches))
    return f"SELECT CASE {cases} END AS k FROM sales_demo"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heavy", type=int, default=6)
    parser.add_argument("--branches", type=int, default=300)
    args = parser.parse_args()
    path = write_demo_sqlite(Path(tempfile.mkdtemp()) / "demo.db")
    engine = SqlEngine(f"sqlite:///{path}")
    service = SqlService(engine, plans=0, timeout_s=30.0)
    started = time.perf_counter()
    service.query(_heavy(args.branches, 0), call_id="alone")
    print(f"one heavy call alone: {time.perf_counter() - started:.2f} s")
    done = threading.Event()
    probes: list[float] = []

    def probe() -> None:
        while not done.is_set():
            t = time.perf_counter()
            service.query("SELECT 1", call_id="probe")
            probes.append(time.perf_counter() - t)
            time.sleep(0.2)

    def heavy(tag: int) -> str:
        t = time.perf_counter()
        try:
            service.query(_heavy(args.branches, tag), call_id=f"h{tag}")
            answer = "answered"
        except Refused as exc:
            answer = f"refused ({(exc.data or {}).get('reason')})"
        return f"{time.perf_counter() - t:.2f} s {answer}"

    prober = threading.Thread(target=probe)
    prober.start()
    with ThreadPoolExecutor(args.heavy) as pool:
        answers = list(pool.map(heavy, range(1, args.heavy + 1)))
    done.set()
    prober.join()
    engine.close()
    for answer in answers:
        print("heavy:", answer)
    worst, median = max(probes), statistics.median(probes)
    print(f"probe SELECT 1: worst {worst:.2f} s, median {median:.3f} s, n={len(probes)}")


if __name__ == "__main__":
    main()
