"""Profile warm `execute_query` calls in-process, as `mcpkit sql serve --dsn ... --no-audit` serves them.

The server is assembled from the same command line the peers bench runs, on a tagged PostgreSQL
table and SELECT-only login (bench/sql_peers.py's set-up), and called through the official client
in memory (`mcpkit.testing.connect`). Prints the median wall time and the CPU time of unprofiled
calls, the database round trips per call (the server's ReadyForQuery messages in libpq's trace),
then cProfile's top functions by cumulative and own time, on the event loop and in the handler threads.
`PYTHONPATH=OTHER/src` profiles another checkout.

    .venv/bin/python bench/sql_profile.py [--pg URL] [--rows 10000] [--calls 300] [--query point|scan]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_peers import setup, teardown

from mcpkit.cli import COMMANDS
from mcpkit.testing import connect


def _args(dsn: str) -> argparse.Namespace:
    import importlib

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(COMMANDS["sql"]).register(sub)
    args = parser.parse_args(["sql", "serve", "--dsn", dsn, "--no-audit"])
    from mcpkit.sql.cli import opt_ins

    args.allow, args.allow_function = opt_ins(args)
    return args


def _profile_threads(worker: cProfile.Profile, active: list[bool]) -> None:
    """Profile the handler threads too (cProfile sees only the thread that enabled it)."""
    from mcpkit import threads

    call = threads._Run.call

    def profiled(self: Any, fn: Any, args: Any) -> Any:
        if not active:
            return call(self, fn, args)
        worker.enable()
        try:
            return call(self, fn, args)
        finally:
            worker.disable()

    threads._Run.call = profiled  # type: ignore[method-assign]


class _RoundTrips:
    """Counts the server's ReadyForQuery messages on every pooled connection (libpq's trace)."""

    def __init__(self) -> None:
        from psycopg import pq
        from sqlalchemy import event
        from sqlalchemy.pool import Pool

        self._file = tempfile.TemporaryFile("w+")  # noqa: SIM115 (read until the bench ends)
        self.per_call: list[float] = []

        def on(dbapi: Any, record: Any, proxy: Any) -> None:
            dbapi.pgconn.trace(self._file.fileno())
            dbapi.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

        def off(dbapi: Any, record: Any) -> None:
            if dbapi is not None:
                dbapi.pgconn.untrace()

        event.listen(Pool, "checkout", on)
        event.listen(Pool, "checkin", off)

    def take(self) -> int:
        self._file.flush()
        self._file.seek(0)
        n = sum(1 for line in self._file if "\tReadyForQuery\t" in line)
        self._file.seek(0)
        self._file.truncate()
        return n


async def _calls(
    server: object,
    sql: str,
    warm: int,
    calls: int,
    profiler: cProfile.Profile,
    active: list[bool],
    cpu: list[float],
    trips: _RoundTrips,
) -> float:
    async with connect(server) as client:  # type: ignore[arg-type]
        for _ in range(warm):
            result = await client.call_tool("execute_query", {"query": sql})
            assert not result.is_error, result
        times = []
        cpu0 = time.process_time()
        for _ in range(calls):  # unprofiled first: the figure to compare
            t0 = time.perf_counter()
            await client.call_tool("execute_query", {"query": sql})
            times.append(time.perf_counter() - t0)
        cpu.append((time.process_time() - cpu0) / calls)
        trips.take()
        for _ in range(20):
            await client.call_tool("execute_query", {"query": sql})
        trips.per_call.append(trips.take() / 20)
        active.append(True)
        profiler.enable()
        for _ in range(calls):
            await client.call_tool("execute_query", {"query": sql})
        profiler.disable()
        active.clear()
        return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--query", choices=("point", "scan"), default="point")
    p.add_argument("--top", type=int, default=30)
    opts = p.parse_args()
    from mcpkit.sql.assemble import assemble, open_sources
    from mcpkit.sql.cli import _dsns

    schema, role, table = setup(opts.pg, opts.rows)
    host = opts.pg.split("://", 1)[1].split("@", 1)[-1]
    sql = f"SELECT * FROM {table} WHERE id = 1234" if opts.query == "point" else f"SELECT * FROM {table}"
    profiler, worker, active, cpu, trips = cProfile.Profile(), cProfile.Profile(), [], [], _RoundTrips()
    _profile_threads(worker, active)
    try:
        with ExitStack() as stack:
            args = _args(f"postgresql://{role}@{host}")
            server = assemble(args, open_sources(args, _dsns(args), stack), stack)
            per_call = anyio.run(_calls, server, sql, 20, opts.calls, profiler, active, cpu, trips)
    finally:
        teardown(opts.pg, schema, role)
    load = os.getloadavg()[0]
    print(
        f"{opts.query}: median {per_call * 1000:.2f} ms per call unprofiled"
        f" ({opts.calls} calls, load {load:.1f}); CPU {cpu[0] * 1000:.2f} ms per call (client and server,"
        f" one process); {trips.per_call[0]:.1f} database round trips per call"
    )
    for title, prof in (("event loop", profiler), ("handler threads", worker)):
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(opts.top)
            print(f"--- {title}, by {key} ---")
            print(out.getvalue())


if __name__ == "__main__":
    main()
