"""mcpkit sql side by side with DBHub, and 50 concurrent clients on the demo database (issue 15).

1. Per-call latency through the official `mcp` client over stdio, on one PostgreSQL table of 10^6
   rows, one read-only account for both servers: `mcpkit sql serve --dsn ... --no-audit` and DBHub
   (`@bytebase/dbhub`, installed from npm into bench/.peers/ by this script; skipped with a reason
   when npm is absent) with `execute_sql` in read-only mode and `max_rows = 25`. Queries: a point
   lookup by primary key and a capped scan (`SELECT *`, 25 rows). Median of 7 calls after warm-up,
   servers interleaved round by round; the server process's CPU per call (children of this process,
   from /proc) beside it, as CPU is less at the mercy of a shared machine than wall time.
2. The model-visible part of `tools/list` (name, description, inputSchema of each tool, as compact
   JSON, the way the wire sends it) for both servers.
3. 50 concurrent official clients against `mcpkit sql serve --demo` over Streamable HTTP (stateless,
   JSON responses), each making `--calls` calls of one GROUP BY query, first paced like agents
   (`--interval` seconds apart, the clients spread over one interval), then back to back (the
   server's saturation); p50/p99 latency, and the CPU of the load generator and of the server, so
   the generator is shown not to be the bottleneck.

    .venv/bin/python bench/sql_peers.py [--pg postgresql://postgres@127.0.0.1:5432/test] [--rows 1000000]
        [--repeat 7] [--cpu-calls 200] [--rounds 3] [--clients 50] [--calls 20] [--interval 1.0]
        [--pool-size 5]
        [--baseline OTHER/src] [--load-rounds 3] [--skip-unpooled] [--skip-floor] [--floor-thread]
        [--skip-peers] [--skip-load]

`--baseline` times another checkout's mcpkit in the same rounds, for before/after ratios (the load
runs alternate it with this checkout `--load-rounds` times).

The table and role are created with a random tag and dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psycopg
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = HERE / ".peers"
DBHUB_VERSION = "1.4.0"
CAP = 25
FLOOR = "floor (bare SDK + psycopg)"
FLOOR_THREAD = "floor, query in a thread"


# --- set-up --------------------------------------------------------------------------------------


def setup(admin_url: str, rows: int) -> tuple[str, str, str]:
    """A schema with one table of `rows` rows and a SELECT-only login; returns (schema, role, table)."""
    tag = secrets.token_hex(4)
    schema, role = f"mk_peers_{tag}", f"mk_peers_ro_{tag}"
    table = f"{schema}.deals"
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE ROLE {role} LOGIN")
        regions = "ARRAY['North America','Europe','Asia Pacific','Latin America','Middle East & Africa']"
        c.execute(
            f"CREATE TABLE {table} AS SELECT g AS id, ({regions})[1 + g % 5] AS region,"
            " 'Product ' || (g % 97) AS product, (g::bigint * 7919) % 500 AS units,"
            " round(((g::bigint * 104729) % 1000000) / 100.0, 2)::numeric(12, 2) AS revenue,"
            f" md5(g::text) || ' note about deal ' || g AS note FROM generate_series(1, {int(rows)}) g"
        )
        c.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
        c.execute(f"ANALYZE {table}")
        c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        c.execute(f"GRANT SELECT ON {table} TO {role}")
    return schema, role, table


def teardown(admin_url: str, schema: str, role: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
        c.execute(f"DROP SCHEMA {schema} CASCADE")
        c.execute(f"DROP ROLE {role}")


def install_dbhub() -> tuple[Path | None, str]:
    """DBHub's entry point under bench/.peers (installed with npm if missing), or None and why."""
    entry = PEERS / "node_modules" / "@bytebase" / "dbhub" / "dist" / "index.js"
    if entry.exists():
        return entry, ""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None, "npm/node not found"
    PEERS.mkdir(exist_ok=True)
    done = subprocess.run(
        [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(PEERS),
            f"@bytebase/dbhub@{DBHUB_VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not entry.exists():
        return None, f"npm install failed: {done.stderr[-300:]}"
    return entry, ""


# --- servers -------------------------------------------------------------------------------------


def mcpkit_params(dsn: str, pool_size: int, src: Path = ROOT / "src") -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(src)}
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", dsn, "--no-audit", "--pool-size", str(pool_size)]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def floor_params(dsn: str, mode: str = "async") -> StdioServerParameters:
    """The floor: bench/servers/bare_sql.py, the official SDK's low-level server with one query tool
    (`mode` "thread": the query on a sync connection in a worker thread, as mcpkit runs it)."""
    script = str(HERE / "servers" / "bare_sql.py")
    return StdioServerParameters(command=sys.executable, args=[script, dsn, mode])


def dbhub_params(entry: Path, dsn: str, folder: Path) -> StdioServerParameters:
    config = folder / "dbhub.toml"
    config.write_text(
        f'[[sources]]\nid = "default"\ndsn = "{dsn}"\n\n'
        f'[[tools]]\nname = "execute_sql"\nsource = "default"\nreadonly = true\nmax_rows = {CAP}\n\n'
        '[[tools]]\nname = "search_objects"\nsource = "default"\n',
        encoding="utf-8",
    )
    return StdioServerParameters(
        command="node", args=[str(entry), "--transport", "stdio", "--config", str(config)], cwd=str(folder)
    )


def visible_bytes(tools: list[Any]) -> tuple[int, list[str]]:
    """Bytes of what the model reads of `tools/list`: name, description, inputSchema, compact JSON."""
    total = 0
    names = []
    for tool in tools:
        wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        seen = {k: wire[k] for k in ("name", "description", "inputSchema") if k in wire}
        total += len(json.dumps(seen, separators=(",", ":"), ensure_ascii=False).encode())
        names.append(wire["name"])
    return total, names


async def timed(
    params: StdioServerParameters,
    tool: str,
    arg: str,
    queries: dict[str, str],
    repeat: int,
    cpu_calls: int = 200,
) -> dict[str, Any]:
    """Median ms per query after 3 warm-up calls, and the tools/list figure."""
    out: dict[str, Any] = {}
    async with Client(params, mode="legacy") as client:
        listed = await client.list_tools()
        out["bytes"], out["tools"] = visible_bytes(listed.tools)
        for label, sql in queries.items():
            for _ in range(3):
                warm = await client.call_tool(tool, {arg: sql})
                assert not warm.is_error, warm
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                result = await client.call_tool(tool, {arg: sql})
                times.append((time.perf_counter() - t0) * 1000)
                assert not result.is_error, result
            out[label] = statistics.median(times)
            cpu0 = _children_cpu_s()  # /proc counts in 10 ms ticks: over more calls than the timed ones
            for _ in range(cpu_calls):
                await client.call_tool(tool, {arg: sql})
            out[f"{label}_cpu"] = (_children_cpu_s() - cpu0) / max(1, cpu_calls) * 1000
    return out


def _children_cpu_s() -> float:
    """CPU seconds of this process's live child processes and theirs (the one server running)."""
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0.0, list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        try:
            total += _cpu_s(pid)
        except OSError:
            continue
        todo.extend(kids.get(pid, []))
    return total


# --- load ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_demo(port: int, pool_size: int, src: Path = ROOT / "src") -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    args = ["-m", "mcpkit", "sql", "serve", "--demo", "--no-audit", "--pool-size", str(pool_size),
            "--transport", "http", "--port", str(port), "--stateless", "--json-response"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the demo server did not start") from None
            time.sleep(0.1)


def _cpu_s(pid: int | None = None) -> float:
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(port: int, clients: int, calls: int, server_pid: int, interval_s: float) -> dict[str, float]:
    """`clients` official clients at once, each making `calls` calls `interval_s` apart (0: back to
    back, which measures the server's saturation rather than the latency an agent sees)."""
    url = f"http://127.0.0.1:{port}/mcp"
    query = {
        "query": "SELECT region, COUNT(*) AS deals, SUM(revenue) AS revenue FROM sales_demo GROUP BY region"
    }
    latencies: list[float] = []
    failures: list[str] = []

    async def one(ready: anyio.Event, offset: float) -> None:
        async with Client(url, mode="legacy") as client:
            await client.call_tool("execute_query", query)  # warm
            await ready.wait()
            await anyio.sleep(offset)  # clients spread over one interval, as agents would be
            for i in range(calls):
                if i and interval_s:
                    await anyio.sleep(interval_s)
                t0 = time.perf_counter()
                result = await client.call_tool("execute_query", query)
                latencies.append(time.perf_counter() - t0)
                if result.is_error:
                    failures.append(str(result.content)[:200])

    ready = anyio.Event()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(one, ready, interval_s * c / clients)
        await anyio.sleep(3.0)  # every client connected and warm
        cpu0, srv0, t0 = _cpu_s(), _cpu_s(server_pid), time.perf_counter()
        ready.set()
    wall = time.perf_counter() - t0
    cpu, srv = _cpu_s() - cpu0, _cpu_s(server_pid) - srv0
    lat = sorted(latencies)
    return {
        "calls": len(lat),
        "failures": len(failures),
        "p50": statistics.median(lat) * 1000,
        "p90": lat[int(len(lat) * 0.9)] * 1000,
        "p99": lat[int(len(lat) * 0.99)] * 1000,
        "rate": len(lat) / wall,
        "gen_cpu": cpu / wall,
        "srv_cpu": srv / wall,
    }


# --- the run -------------------------------------------------------------------------------------


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cpu-calls", type=int, default=200, help="calls over which server CPU is measured")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between one client's calls")
    parser.add_argument("--load-rounds", type=int, default=3, help="with --baseline: alternated load runs")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument(
        "--baseline",
        metavar="SRC",
        help="also time the mcpkit whose src/ folder this is (e.g. `git archive` of an older commit)",
    )
    parser.add_argument("--skip-floor", action="store_true", help="leave out bench/servers/bare_sql.py")
    parser.add_argument(
        "--floor-thread", action="store_true", help="also the floor with the query in a thread"
    )
    parser.add_argument("--skip-unpooled", action="store_true", help="leave out --pool-size 0")
    opts = parser.parse_args()
    load_avg = os.getloadavg()
    print(
        f"load average at start: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}"
        f" on {os.cpu_count()} CPUs"
    )
    if not opts.skip_peers:
        await peers(opts)
    if not opts.skip_load:
        await loads(opts)


async def loads(opts: argparse.Namespace) -> None:
    """The load runs, paced then back to back (with `--baseline`, both servers alternated)."""
    servers = [("mcpkit", ROOT / "src")]
    if opts.baseline:
        servers.append(("mcpkit baseline", Path(opts.baseline).resolve()))
    for interval in (opts.interval, 0.0):
        for round_no in range(opts.load_rounds if opts.baseline else 1):
            for name, src in servers:
                port = free_port()
                proc = start_demo(port, opts.pool_size, src)
                try:
                    r = await load(port, opts.clients, opts.calls, proc.pid, interval)
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
                pace = f"one call per {interval:g} s each" if interval else "back to back (saturation)"
                print(
                    f"\n[{name}, round {round_no + 1}, load {os.getloadavg()[0]:.1f}] {opts.clients} "
                    f"concurrent clients x {opts.calls} calls, {pace}, demo database (SQLite), stateless "
                    f"HTTP JSON, pool {opts.pool_size}: {r['calls']:.0f} calls, {r['failures']:.0f} failed, "
                    f"p50 {r['p50']:.1f} ms, p90 {r['p90']:.1f} ms, p99 {r['p99']:.1f} ms, "
                    f"{r['rate']:.0f} calls/s; load generator CPU {r['gen_cpu']:.0%} of one core, "
                    f"server {r['srv_cpu']:.0%}"
                )


async def peers(opts: argparse.Namespace) -> None:
    entry, why = install_dbhub()
    schema, role, table = setup(opts.pg, opts.rows)
    user_at = opts.pg.split("://", 1)[1].split("@", 1)
    host = user_at[1] if len(user_at) == 2 else user_at[0]
    mk_dsn, hub_dsn = f"postgresql://{role}@{host}", f"postgres://{role}@{host}?sslmode=disable"
    queries = {"point": f"SELECT * FROM {table} WHERE id = 123457", "scan": f"SELECT * FROM {table}"}
    servers: list[tuple[str, int, Path]] = [("mcpkit", opts.pool_size, ROOT / "src")]
    if opts.baseline:
        servers.append(("mcpkit baseline", opts.pool_size, Path(opts.baseline).resolve()))
    if not opts.skip_unpooled:
        servers.append(("mcpkit --pool-size 0", 0, ROOT / "src"))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in servers}
    results["DBHub"] = []
    if not opts.skip_floor:
        results[FLOOR] = []
    if opts.floor_thread:
        results[FLOOR_THREAD] = []
    try:
        with tempfile.TemporaryDirectory(prefix="mk-peers-") as folder:
            for _ in range(opts.rounds):
                for name, size, src in servers:
                    params = mcpkit_params(mk_dsn, size, src)
                    results[name].append(
                        await timed(params, "execute_query", "query", queries, opts.repeat, opts.cpu_calls)
                    )
                if not opts.skip_floor:
                    results[FLOOR].append(
                        await timed(
                            floor_params(mk_dsn),
                            "execute_query",
                            "query",
                            queries,
                            opts.repeat,
                            opts.cpu_calls,
                        )
                    )
                if opts.floor_thread:
                    results[FLOOR_THREAD].append(
                        await timed(
                            floor_params(mk_dsn, "thread"),
                            "execute_query",
                            "query",
                            queries,
                            opts.repeat,
                            opts.cpu_calls,
                        )
                    )
                if entry is not None:
                    results["DBHub"].append(
                        await timed(
                            dbhub_params(entry, hub_dsn, Path(folder)),
                            "execute_sql",
                            "sql",
                            queries,
                            opts.repeat,
                            opts.cpu_calls,
                        )
                    )
    finally:
        teardown(opts.pg, schema, role)
    print(
        f"\n{opts.rows:,}-row PostgreSQL table, official client over stdio, "
        f"median of {opts.repeat} calls per round"
    )
    if entry is None:
        print(f"DBHub skipped: {why}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; server CPU: ms of CPU per call")
    print(
        "| server | round | point lookup ms | server CPU | capped scan ms | server CPU"
        " | tools/list model-visible bytes (tools) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, runs in results.items():
        for i, r in enumerate(runs, 1):
            print(
                f"| {name} | {i} | {r['point']:.2f} | {r['point_cpu']:.2f} | {r['scan']:.2f} |"
                f" {r['scan_cpu']:.2f} | {r['bytes']:,} ({', '.join(r['tools'])}) |"
            )
    for name, runs in results.items():
        if runs:
            print(
                f"{name}: medians over rounds: point {statistics.median(r['point'] for r in runs):.2f} ms"
                f" (CPU {statistics.median(r['point_cpu'] for r in runs):.2f}),"
                f" scan {statistics.median(r['scan'] for r in runs):.2f} ms"
                f" (CPU {statistics.median(r['scan_cpu'] for r in runs):.2f})"
            )
    pairs: list[tuple[str, str]] = []  # (server, the one it is divided by)
    if results["DBHub"]:
        pairs += [(n, "DBHub") for n in ("mcpkit", "mcpkit baseline", FLOOR) if results.get(n)]
    if results.get(FLOOR):
        pairs += [(n, FLOOR) for n in ("mcpkit", "mcpkit baseline", FLOOR_THREAD) if n in results]
    for name, other in pairs:
        for label in ("point", "scan"):
            ratios = [m[label] / d[label] for m, d in zip(results[name], results[other], strict=True)]
            cpus = [
                m[f"{label}_cpu"] / d[f"{label}_cpu"] if d[f"{label}_cpu"] else float("inf")
                for m, d in zip(results[name], results[other], strict=True)
            ]
            print(
                f"{label}: {name} / {other} per round: {', '.join(f'{x:.2f}x' for x in ratios)}"
                f" (median {statistics.median(ratios):.2f}x); server CPU"
                f" {', '.join(f'{x:.2f}x' for x in cpus)} (median {statistics.median(cpus):.2f}x)"
            )


if __name__ == "__main__":
    anyio.run(main)
