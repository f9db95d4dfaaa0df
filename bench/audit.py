"""What the audit log adds to a call: end to end through the official client, and its parts.

1. End to end: `execute_query("SELECT 1")` on the demo SQLite database through the official SDK
   client (in memory), the same server with no audit, with the audit to a SQLite file (WAL), and
   with the audit to a PostgreSQL table. Rounds alternate between configurations so drift hits
   all alike; per-call latency median, p95 and mean.
2. The call path alone: `AuditLog.record()` and `CallAudit.handle()` per call, in microseconds.
3. The writer: records per second it stores (SQLite WAL, PostgreSQL), off the call path.

    .venv/bin/python bench/audit.py [--calls 3000] [--rounds 6] [--pg postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg

from mcpkit import Context, Server
from mcpkit.logs import CALL_LOGGER
from mcpkit.sql.audit import AuditLog, AuditRecord, CallAudit, open_store
from mcpkit.sql.demo import write_demo_sqlite
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect


def _server(service: SqlService, calls: CallAudit | None) -> Server:
    base = build_server(service)
    if calls is None:
        return base

    def wrap(inner: Callable[..., Any]) -> Callable[..., Any]:
        def handler(args: Any, ctx: Context) -> Any:
            with calls.noting(ctx):
                out = inner(args, ctx)
                calls.note(ctx.call_id, rows=1, truncated=False, sql="SELECT 1 LIMIT 26")
                return out

        return handler

    tools = [replace(t, handler=wrap(t.handler)) for t in base.available_tools()]
    return Server(base.name, instructions=base.instructions, tools=tools)


async def _calls(server: Server, n: int) -> list[float]:
    out = []
    async with connect(server) as client:
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
    service: SqlService, stores: dict[str, Any], calls: int, rounds: int
) -> dict[str, list[float]]:
    """Per-call latencies (ms) of each configuration; rounds alternate between them.

    Every configuration emits the core's call records (its default: `mcpkit` logs at INFO), to
    no console, so the difference is the audit alone.
    """
    samples: dict[str, list[float]] = {name: [] for name in stores}
    for _ in range(rounds):
        for name, (make_store, linger) in stores.items():
            audit = AuditLog(make_store(), linger_s=linger) if make_store else None
            audited = CallAudit(audit) if audit else None
            if audited:
                audited.attach()
            try:
                samples[name] += asyncio.run(_calls(_server(service, audited), calls // rounds))
            finally:
                if audited and audit:
                    audited.detach()
                    audit.close()
    return samples


def call_path(n: int = 100_000) -> tuple[float, float]:
    """Microseconds per `record()` and per `CallAudit.handle()` (the work a call does)."""
    audit = AuditLog(open_store(dsn="sqlite:///:memory:"), linger_s=3600, max_queued=10**7)
    calls = CallAudit(audit)
    rec = AuditRecord(call_id="c", tool="execute_query", outcome="OK")
    started = time.perf_counter()
    for _ in range(n):
        audit.record(rec)
    per_record = (time.perf_counter() - started) / n * 1e6
    call = {"call_id": "c", "tool": "execute_query", "outcome": "OK", "duration_ms": 1.0, "arguments": "{}"}
    started = time.perf_counter()
    for i in range(n):
        calls.note(str(i), sql="SELECT 1", rows=1)
        calls.handle({**call, "call_id": str(i)})
    per_handle = (time.perf_counter() - started) / n * 1e6
    audit.close(timeout_s=60)
    return per_record, per_handle


def throughput(make_store: Callable[[], Any], n: int = 20_000) -> float:
    """Records per second the writer stores."""
    audit = AuditLog(make_store())
    rec = AuditRecord(call_id="c", tool="execute_query", outcome="OK", sql="SELECT 1 LIMIT 26", rows=1)
    audit.record(rec)
    audit.flush()  # table created
    started = time.perf_counter()
    for _ in range(n):
        audit.record(rec)
    audit.flush(timeout_s=120)
    elapsed = time.perf_counter() - started
    audit.close()
    return n / elapsed


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

    def sqlite() -> Any:
        return open_store(path=folder / f"audit{next(counter)}.db")

    def postgres() -> Any:
        return open_store(dsn=pg)

    stores: dict[str, Any] = {
        "no audit": (None, 0.0),
        "audit: SQLite file (WAL), linger 0": (sqlite, 0.0),
        "audit: SQLite file (WAL), linger 50 ms (default)": (sqlite, 0.05),
        "audit: PostgreSQL table, linger 0": (postgres, 0.0),
        "audit: PostgreSQL table, linger 50 ms (default)": (postgres, 0.05),
    }
    try:
        samples = end_to_end(service, stores, args.calls, args.rounds)
        base = _stats(samples["no audit"])
        print(
            f"\n### End to end: {args.calls} calls each, execute_query(SELECT 1), official client in memory\n"
        )
        print("| configuration | median ms | p95 ms | mean ms | added (median) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, values in samples.items():
            med, p95, mean = _stats(values)
            added = "" if name == "no audit" else f"{(med - base[0]) * 1000:+.0f} µs"
            print(f"| {name} | {med:.3f} | {p95:.3f} | {mean:.3f} | {added} |")
        per_record, per_handle = call_path()
        print("\n### The call path alone\n")
        print("| step | µs per call |\n| --- | ---: |")
        print(f"| `AuditLog.record()` (queue put) | {per_record:.2f} |")
        print(f"| `CallAudit.note()` + `handle()` (build the record, queue it) | {per_handle:.2f} |")
        print("\n### The writer (off the call path)\n")
        print("| store | records/s |\n| --- | ---: |")
        for name, make in (("SQLite file (WAL)", sqlite), ("PostgreSQL table", postgres)):
            print(f"| {name} | {throughput(make):,.0f} |")
    finally:
        engine.close()
        with psycopg.connect(args.pg, autocommit=True) as c:
            c.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
