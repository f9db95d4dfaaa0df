"""PostgreSQL backend memory under a data limit (RLIMIT_DATA) and without: the start-up probe's cost
and the red team's worst cases, each on a fresh connection with no admission (the engine alone).

For each URL: the probe (`checks.backend_memory`) at --budget, timed, with the backend's peak RSS
(`VmHWM`, shared buffers touched included); then each case at size --scale (1.0: the red team's
sizes; keep it small on an unlimited server), its outcome (rows, or the SQLSTATE), time and peak
RSS, and whether another connection answered meanwhile. Needs the server on this host (/proc).

    .venv/bin/python bench/sql_pg_backend_memory.py URL [URL ...] [--budget 1G] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import threading
import time

import psycopg

from mcpkit.sql.checks import backend_memory, parse_memory
from mcpkit.sql.engines.engine import SqlEngine


def cases(scale: float) -> dict[str, str]:
    """The worst cases, with counts and sizes scaled."""
    n = max(1, int(900 * scale))
    k = max(1, int(800 * scale))
    big = max(1, int(200_000_000 * scale))
    copy = max(1, int(100_000_000 * scale))
    return {
        f"array_fill {n} x 1 MB": (
            f"SELECT length(array_to_string(array_fill(repeat('x', 1000000), ARRAY[{n}]), ''))"
        ),
        f"array_agg {k} x 1 MB": (
            f"SELECT cardinality(array_agg(v)) FROM (SELECT repeat('x', 1000000) || g AS v"
            f" FROM generate_series(1, {k}) g) s"
        ),
        f"string_agg {k} x 1 MB": (
            f"SELECT length(string_agg(v, '')) FROM (SELECT repeat('x', 1000000) || g AS v"
            f" FROM generate_series(1, {k}) g) s"
        ),
        f"3 x {big / 1e6:g} MB concatenated": (
            f"SELECT length(repeat('a', {big}) || repeat('b', {big}) || repeat('c', {big}))"
        ),
        f"nested copies of {copy / 1e6:g} MB": (
            f"SELECT length((SELECT (SELECT a || a || a || a || a || a FROM"
            f" (SELECT repeat('x', {copy}) AS a) s1) || 'y') || 'z')"
        ),
    }


def _peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def main() -> None:
    """Print one line per URL and case."""
    parser = argparse.ArgumentParser()
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--budget", type=parse_memory, default=parse_memory("1G"))
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    for url in args.urls:
        engine = SqlEngine(url, pool_size=0)
        started = time.perf_counter()
        verdict = backend_memory(engine, args.budget, ())
        took = time.perf_counter() - started
        engine.close()
        print(f"{url}: probe {verdict[0] if verdict else None} in {took * 1000:.0f} ms")
        for name, sql in cases(args.scale).items():
            with (
                psycopg.connect(url, autocommit=True) as conn,
                psycopg.connect(url, autocommit=True) as other,
            ):
                row = conn.execute("SELECT pg_backend_pid()").fetchone()
                assert row is not None
                pid, slowest, stop = int(row[0]), [0.0], threading.Event()

                def ask(
                    other: psycopg.Connection = other,
                    slowest: list[float] = slowest,
                    stop: threading.Event = stop,
                ) -> None:
                    while not stop.is_set():
                        t = time.perf_counter()
                        other.execute("SELECT 1").fetchone()
                        slowest[0] = max(slowest[0], time.perf_counter() - t)
                        time.sleep(0.02)

                asking = threading.Thread(target=ask)
                asking.start()
                t = time.perf_counter()
                try:
                    outcome = f"answered {conn.execute(sql).fetchone()}"
                except psycopg.Error as exc:
                    outcome = f"{exc.sqlstate} {str(exc).splitlines()[0]}"
                took = time.perf_counter() - t
                stop.set()
                asking.join()
                peak = _peak_mb(pid)
                alive = conn.execute("SELECT 1").fetchone() == (1,)
            print(
                f"  {name}: {outcome} in {took:.2f} s, backend peak {peak:.0f} MB, "
                f"other connection slowest {slowest[0] * 1000:.0f} ms, backend alive {alive}"
            )


if __name__ == "__main__":
    main()
