"""Load: concurrent clients over Streamable HTTP against two replicas sharing one Redis.

Each client is the official SDK client (`mcp.Client`) on its own session, alternating replicas; every call
must succeed. Phase 2 hammers a rate-limited tool from all clients at once, all with one bearer token (one
principal: without auth every connection is a caller of its own) and checks that the per-caller limit,
shared through Redis, admitted exactly its budget across both replicas.
With `--sql`, the replicas are `mcpkit sql serve --demo` auditing into one PostgreSQL table, phase 1 runs
`execute_query`, and every call's audit record is counted after the replicas stop.

    .venv/bin/python bench/load.py [--clients 50] [--calls 200] [--sql] [--redis redis://127.0.0.1:6379/0]
        [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "servers" / "http_app.py"
SQL_QUERY = {"query": "SELECT region, COUNT(*) AS deals FROM sales_demo GROUP BY region"}
TOKEN = f"load-{uuid.uuid4().hex}"  # the one principal (`bench`) every client of phase 2 shares


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int, name: str, opts: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{opts.src}"}
    if opts.sql:  # the SQL server on its demo database, both replicas auditing into one table
        args = [
            "-m",
            "mcpkit",
            "sql",
            "serve",
            "--demo",
            "--transport",
            "http",
            "--port",
            str(port),
            "--stateless",
            "--json-response",
            "--redis",
            opts.redis,
            "--audit-dsn",
            opts.audit_dsn,
        ]
    else:
        args = [
            str(APP),
            str(port),
            "--stateless",
            "--json",
            "--redis",
            opts.redis,
            "--name",
            name,
            "--limit",
            str(opts.limit),
            "--max-concurrent",
            "1000",
            "--tokens",
            str(opts.tokens),
        ]
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
                raise RuntimeError("a replica did not start") from None
            time.sleep(0.1)


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    took: float = 0.0


async def client_run(url: str, calls: int, tool: str, p: Phase, token: str | None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        for i in range(calls):
            arguments = SQL_QUERY if tool == "execute_query" else {"text": f"c{i}"}
            t0 = time.perf_counter()
            try:
                result = await client.call_tool(tool, arguments)
            except Exception as exc:  # a failed call is the thing we measure
                p.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            p.latencies.append(time.perf_counter() - t0)
            meta = result.meta or {}
            code = meta.get("mcpkit/error", {}).get("code", "OK")
            p.outcomes.append(code)
            p.call_ids.append(meta.get("mcpkit/callId", ""))
            if tool != "echo" and code != "OK":
                p.failures.append(code)


async def phase(urls: list[str], clients: int, calls: int, tool: str, token: str | None = None) -> Phase:
    p = Phase()
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(client_run, urls[c % len(urls)], calls, tool, p, token)
    p.took = time.perf_counter() - started
    return p


def audited(dsn: str, call_ids: list[str]) -> int:
    """How many of `call_ids` have an audit record."""
    from mcpkit.sql.audit import open_store

    store = open_store(dsn=dsn)
    try:
        found = {r.call_id for r in store.read()}
    finally:
        store.close()
    return len(found & set(call_ids))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--limit", type=int, default=500, help="the global per-minute limit of phase 2")
    parser.add_argument("--redis", default=os.environ.get("MCPKIT_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--sql", action="store_true", help="load the SQL server and count its audit records")
    parser.add_argument("--audit-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument(
        "--src",
        default=str(ROOT / "src"),
        help="the mcpkit the replicas run (another checkout's src/: before/after)",
    )
    opts = parser.parse_args()
    name = f"load-{uuid.uuid4().hex[:8]}"
    opts.tokens = Path(f"/tmp/{name}.tokens")
    opts.tokens.write_text(f"bench {TOKEN}\n")
    ports = [free_port(), free_port()]
    procs = [start(port, name, opts) for port in ports]
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    tool = "execute_query" if opts.sql else "whoami"
    try:
        p1 = await phase(urls, opts.clients, opts.calls, tool, None if opts.sql else TOKEN)
        p2 = (
            None
            if opts.sql
            else await phase(urls, opts.clients, max(1, opts.limit * 2 // opts.clients), "echo", TOKEN)
        )
    finally:
        for proc in procs:
            proc.terminate()  # SIGTERM: the replicas drain and flush their audit
            proc.wait(timeout=30)
        opts.tokens.unlink(missing_ok=True)
    lat = sorted(p1.latencies)
    total = opts.clients * opts.calls
    print(
        f"phase 1: {opts.clients} clients x {opts.calls} calls of {tool} = {total} calls over 2 replicas "
        "(stateless HTTP, JSON responses, Redis-shared policy)"
    )
    print(
        f"  failed calls: {len(p1.failures)}  throughput: {total / p1.took:.0f} calls/s  "
        f"p50 {statistics.median(lat) * 1000:.1f} ms  p99 {lat[int(len(lat) * 0.99)] * 1000:.1f} ms"
    )
    if p1.failures:
        print("  first failures:", p1.failures[:3])
    if opts.sql:
        print(f"  audit records found for {audited(opts.audit_dsn, p1.call_ids)} of {len(p1.call_ids)} calls")
    if p2 is not None:
        admitted = p2.outcomes.count("OK")
        print(
            f"phase 2: {len(p2.outcomes)} calls to a tool limited to {opts.limit}/min per caller identity "
            "(all clients share one bearer token), across both replicas"
        )
        print(
            f"  admitted {admitted} (limit {opts.limit}, off by {admitted - opts.limit}), "
            f"rate-limited {p2.outcomes.count('RATE_LIMITED')}, transport failures {len(p2.failures)}"
        )


if __name__ == "__main__":
    anyio.run(main)
