"""Sample `mcpkit sql serve` over stdio with py-spy while the official client calls it in a loop.

The server runs as the peers bench runs it (`--dsn ... --no-audit`, pool of 5) on a tagged table
and SELECT-only login (bench/sql_peers.py's set-up). py-spy (`pip install py-spy`) samples every
thread of the server process, idle ones excluded; the output is the raw folded stacks, which
this script also sums into the share of samples under a few frames of interest. Prints the
server's CPU per call (from /proc) and the median wall time per call.

    .venv/bin/python bench/sql_stdio_profile.py [--query point|scan] [--calls 1500] [--out /tmp/x.txt]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_peers import _children_cpu_s, mcpkit_params, setup, teardown

# Frames (substrings of py-spy's "function (file:line)") whose inclusive share is reported.
FRAMES = {
    "tool call in the server core (`_on_call_tool`)": "_on_call_tool (mcpkit/server.py",
    "handler thread: execute_query": "execute_query (mcpkit/sql/server.py",
    "  admission / plan cache (`_plan`)": "_plan (mcpkit/sql/service.py",
    "  engine: session, round trips, fetch": "execute (mcpkit/sql/engines/engine.py",
    "    waiting for PostgreSQL (psycopg `wait`)": "wait (psycopg/connection.py",
    "  shaping (`shape_rows`)": "shape_rows (mcpkit/sql/shaping.py",
    "  markdown (`render_markdown`)": "render_markdown (mcpkit/sql/render.py",
    "operator record (`log_call`)": "log_call (mcpkit/logs.py",
    "SDK: reading and parsing stdin": "stdin_reader",
    "SDK: writing stdout": "stdout_writer",
    "SDK: result serialisation (`serialize_server_result`)": "serialize_server_result",
    "SDK: request validation (`validate_client_request`)": "validate_client_request",
}


async def drive(dsn: str, sql: str, calls: int, spy: list[str]) -> tuple[float, float]:
    async with Client(mcpkit_params(dsn, 5), mode="legacy") as client:
        for _ in range(30):
            await client.call_tool("execute_query", {"query": sql})
        proc = None
        if spy:
            proc = subprocess.Popen([*spy, "--pid", str(_server_pid())], stdout=subprocess.DEVNULL)
            await anyio.sleep(1.0)  # py-spy attaches
        cpu0, times = _children_cpu_s(), []
        for _ in range(calls):
            t0 = time.perf_counter()
            await client.call_tool("execute_query", {"query": sql})
            times.append(time.perf_counter() - t0)
        cpu = (_children_cpu_s() - cpu0) / calls
        if proc is not None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            proc.wait(30)
        return statistics.median(times), cpu


def _server_pid() -> int:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid():
            return int(stat.parent.name)
    raise RuntimeError("no server process")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--calls", type=int, default=1500)
    p.add_argument("--query", choices=("point", "scan"), default="point")
    p.add_argument("--out", default="/tmp/mcpkit-stdio-profile.txt")
    p.add_argument(
        "--no-spy", action="store_true", help="only the CPU and wall time (py-spy pauses the server)"
    )
    opts = p.parse_args()
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    spy = (
        []
        if opts.no_spy
        else [exe, "record", "--format", "raw", "--rate", "250", "--threads", "--gil", "--output", opts.out]
    )
    schema, role, table = setup(opts.pg, opts.rows)
    host = opts.pg.split("://", 1)[1].split("@", 1)[-1]
    sql = f"SELECT * FROM {table} WHERE id = 1234" if opts.query == "point" else f"SELECT * FROM {table}"
    try:
        wall, cpu = anyio.run(drive, f"postgresql://{role}@{host}", sql, opts.calls, spy)
    finally:
        teardown(opts.pg, schema, role)
    if opts.no_spy:
        print(
            f"{opts.query}: median {wall * 1000:.2f} ms per call over stdio, server CPU {cpu * 1000:.2f} ms"
            f" per call ({opts.calls} calls, load {os.getloadavg()[0]:.1f})"
        )
        return
    totals: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in Path(opts.out).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        samples += n
        for label, frame in FRAMES.items():
            if frame in stack:
                totals[label] += n
    print(
        f"{opts.query}: median {wall * 1000:.2f} ms per call over stdio, server CPU {cpu * 1000:.2f} ms"
        f" per call ({opts.calls} calls, load {os.getloadavg()[0]:.1f}); {samples} samples of busy threads"
    )
    for label in FRAMES:
        print(f"  {label}: {totals[label] / max(1, samples):.0%} of samples")


if __name__ == "__main__":
    main()
