"""What the write-ahead audit costs a call, with the fsync on (`--audit-sync full`) and off (`normal`).

1. End to end: `execute_query("SELECT 1")` on the demo SQLite database through the official SDK
   client (in memory): no audit, then the audit to a SQLite file and to a PostgreSQL table, each
   with `sync=full` and `sync=normal`. Every audited call stores two chained entries (start before
   the tool runs, end before the answer) and waits for both. Rounds alternate between
   configurations so drift hits all alike; per-call latency median, p95 and mean.
2. One entry alone: `AuditStore.append` of one entry, per sync mode and store (the commit, the
   chain link, and for `full` the fsync).
3. Group commit: entries per second and entries per commit when 1, 8 or 64 calls write at once.

    .venv/bin/python bench/audit.py [--calls 3000] [--rounds 6] [--pg postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from mcpkit.logs import CALL_LOGGER
from mcpkit.sql.audit import AuditLog, AuditStore, CallAudit, open_store
from mcpkit.sql.demo import write_demo_sqlite
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect

MakeStore = Callable[[str], AuditStore]


async def _calls(service: SqlService, calls: CallAudit | None, n: int) -> list[float]:
    out = []
    async with connect(build_server(service, calls=calls)) as client:
        for _ in range(20):  # warm-up
            await client.call_tool("execute_query", {"query": "SELECT 1"})
        for _ in range(n):
            started = time.perf_counter()
            result = await client.call_tool("execute_query", {"query": "SELECT 1"})
            out.append((time.perf_counter() - started) * 1000)
            assert not result.is_error
    return out


def _stats(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95)], statistics.fmean(ordered)


def end_to_end(
    service: SqlService, configs: dict[str, tuple[MakeStore | None, str]], calls: int, rounds: int
) -> dict[str, list[float]]:
    """Per-call latencies (ms) of each configuration; rounds alternate between them."""
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, (make, sync) in configs.items():
            audit = AuditLog(make(sync)) if make else None
            try:
                samples[name] += asyncio.run(
                    _calls(service, CallAudit(audit) if audit else None, calls // rounds)
                )
            finally:
                if audit:
                    audit.close()
    return samples


def _entry(i: int) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).isoformat()
    return {"v": 1, "kind": "start", "call_id": f"c{i}", "at": now, "tool": "execute_query",
            "statement": "SELECT 1", "arguments": '{"query":"SELECT 1"}'}  # fmt: skip


def one_entry(store: AuditStore, n: int = 1000) -> float:
    """Microseconds per `append` of one entry (one transaction each)."""
    store.append([_entry(0)])
    started = time.perf_counter()
    for i in range(n):
        store.append([_entry(i)])
    return (time.perf_counter() - started) / n * 1e6


def group_commit(store: AuditStore, concurrency: int, n: int = 4000) -> tuple[float, float]:
    """(entries per second, entries per commit) with `concurrency` calls writing at once."""
    audit = AuditLog(store)

    async def writer(k: int) -> None:
        for i in range(n // concurrency):
            await audit.write(_entry(k * n + i))

    async def run() -> float:
        await audit.write(_entry(-1))
        before = audit.commits
        started = time.perf_counter()
        await asyncio.gather(*(writer(k) for k in range(concurrency)))
        elapsed = time.perf_counter() - started
        return n / elapsed, n / max(1, audit.commits - before)

    try:
        return asyncio.run(run())
    finally:
        audit.close()


def main() -> None:
    """Run the three measurements and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    logging.getLogger("mcpkit").addHandler(logging.NullHandler())
    CALL_LOGGER.setLevel(logging.INFO)
    CALL_LOGGER.propagate = False
    folder = Path(tempfile.mkdtemp(prefix="mcpkit-bench-audit-"))
    engine = SqlEngine(f"sqlite:///{write_demo_sqlite(folder / 'demo.db')}")
    service = SqlService(engine, timeout_s=10.0)
    schema = f"mcpkit_bench_audit_{secrets.token_hex(3)}"
    with psycopg.connect(args.pg, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    pg = f"{args.pg}?options=-csearch_path%3D{schema}"
    counter = iter(range(10**6))

    def sqlite(sync: Any) -> AuditStore:
        return open_store(path=folder / f"audit{next(counter)}.db", sync=sync)

    def postgres(sync: Any) -> AuditStore:
        return open_store(dsn=pg, sync=sync)

    configs: dict[str, tuple[MakeStore | None, str]] = {
        "no audit": (None, ""),
        "SQLite file, sync=full (fsync, default)": (sqlite, "full"),
        "SQLite file, sync=normal": (sqlite, "normal"),
        "PostgreSQL table, sync=full (default)": (postgres, "full"),
        "PostgreSQL table, sync=normal": (postgres, "normal"),
    }
    try:
        samples = end_to_end(service, configs, args.calls, args.rounds)
        base = _stats(samples["no audit"])
        print(f"\n### End to end: {args.calls} calls each, execute_query(SELECT 1), official client\n")
        print("| configuration | median ms | p95 ms | mean ms | added (median) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, values in samples.items():
            med, p95, mean = _stats(values)
            added = "" if name == "no audit" else f"{(med - base[0]) * 1000:+.0f} µs"
            print(f"| {name} | {med:.3f} | {p95:.3f} | {mean:.3f} | {added} |")
        print("\n### One entry, one transaction\n")
        print("| store | sync=full µs | sync=normal µs |\n| --- | ---: | ---: |")
        for name, make in (("SQLite file (WAL)", sqlite), ("PostgreSQL table", postgres)):
            full, normal = (one_entry(make(s)) for s in ("full", "normal"))
            print(f"| {name} | {full:.0f} | {normal:.0f} |")
        print("\n### Group commit (sync=full): calls writing at once\n")
        print("| store | concurrent calls | entries/s | entries per commit |\n| --- | ---: | ---: | ---: |")
        for name, make in (("SQLite file (WAL)", sqlite), ("PostgreSQL table", postgres)):
            for concurrency in (1, 8, 64):
                rate, per_commit = group_commit(make("full"), concurrency)
                print(f"| {name} | {concurrency} | {rate:,.0f} | {per_commit:.1f} |")
    finally:
        engine.close()
        with psycopg.connect(args.pg, autocommit=True) as c:
            c.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
