"""Load: concurrent clients over Streamable HTTP against two replicas sharing one Redis.

Each client is the official SDK client (`mcp.Client`) on its own session, alternating replicas; every call
must succeed. A second phase hammers a rate-limited tool from all clients at once and checks the global
limit (shared through Redis) admitted exactly its budget across both replicas.

    .venv/bin/python bench/load.py [--clients 50] [--calls 200] [--redis redis://127.0.0.1:6379/0]
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
from pathlib import Path

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "servers" / "http_app.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int, name: str, redis: str, limit: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    args = [
        sys.executable,
        str(APP),
        str(port),
        "--stateless",
        "--json",
        "--redis",
        redis,
        "--name",
        name,
        "--limit",
        str(limit),
        "--max-concurrent",
        "1000",
    ]
    proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


async def client_run(
    url: str, calls: int, latencies: list[float], failures: list[str], tool: str, outcomes: list[str]
) -> None:
    async with Client(url, mode="legacy") as client:
        for i in range(calls):
            t0 = time.perf_counter()
            try:
                result = await client.call_tool(tool, {"text": f"c{i}"})
            except Exception as exc:  # a failed call is the thing we measure
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - t0)
            code = (result.meta or {}).get("mcpkit/error", {}).get("code", "OK")
            outcomes.append(code)
            if tool == "whoami" and code != "OK":
                failures.append(code)


async def phase(
    urls: list[str], clients: int, calls: int, tool: str
) -> tuple[list[float], list[str], list[str], float]:
    latencies: list[float] = []
    failures: list[str] = []
    outcomes: list[str] = []
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(client_run, urls[c % len(urls)], calls, latencies, failures, tool, outcomes)
    return latencies, failures, outcomes, time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--limit", type=int, default=500, help="the global per-minute limit of phase 2")
    parser.add_argument("--redis", default=os.environ.get("MCPKIT_REDIS_URL", "redis://127.0.0.1:6379/0"))
    opts = parser.parse_args()
    name = f"load-{uuid.uuid4().hex[:8]}"
    ports = [free_port(), free_port()]
    procs = [start(p, name, opts.redis, opts.limit) for p in ports]
    urls = [f"http://127.0.0.1:{p}/mcp" for p in ports]
    try:
        lat, failures, _, took = await phase(urls, opts.clients, opts.calls, "whoami")
        lat.sort()
        total = opts.clients * opts.calls
        print(
            f"phase 1: {opts.clients} clients x {opts.calls} calls = {total} calls over 2 replicas "
            f"(stateless HTTP, JSON responses, Redis-shared policy)"
        )
        print(
            f"  failed calls: {len(failures)}  throughput: {total / took:.0f} calls/s  "
            f"p50 {statistics.median(lat) * 1000:.1f} ms  p99 {lat[int(len(lat) * 0.99)] * 1000:.1f} ms"
        )
        if failures:
            print("  first failures:", failures[:3])
        per_client = max(1, (opts.limit * 2) // opts.clients)
        _, failures2, outcomes, _ = await phase(urls, opts.clients, per_client, "echo")
        admitted = outcomes.count("OK")
        print(
            f"phase 2: {len(outcomes)} calls to a tool limited to {opts.limit}/min per caller identity "
            f"(all clients share one identity), across both replicas"
        )
        print(
            f"  admitted {admitted} (limit {opts.limit}, off by {admitted - opts.limit}), "
            f"rate-limited {outcomes.count('RATE_LIMITED')}, transport failures {len(failures2)}"
        )
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=15)


if __name__ == "__main__":
    anyio.run(main)
