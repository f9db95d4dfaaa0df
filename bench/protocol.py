"""tools/call throughput and p50/p99 latency of one trivial tool: mcpkit, the bare SDK server and FastMCP.

Each server runs as its own subprocess; the official SDK client (`mcp.Client`, 2025-11-25 handshake) makes
N sequential calls after a warm-up, over stdio and over Streamable HTTP (SSE and JSON responses). Servers
are measured interleaved, round by round, so machine noise hits all of them alike; the best round counts.

    .venv/bin/python bench/protocol.py [--calls 2000] [--rounds 3] [--transports stdio,http-sse,http-json]
        [--baseline OTHER/src]

`--baseline` adds a fourth server, "mcpkit (baseline)": the same mcpkit server script run against
another checkout's `src/` (e.g. `git archive main src | tar -x -C /tmp/main`), so a change is measured
against the code before it in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
SERVERS = {
    "mcpkit": HERE / "servers" / "mcpkit_server.py",
    "bare SDK": HERE / "servers" / "bare_sdk.py",
    "FastMCP": HERE / "servers" / "fastmcp_server.py",
}
SOURCES = dict.fromkeys(SERVERS, HERE.parent / "src")  # what PYTHONPATH each server runs with
BASELINE = "mcpkit (baseline)"


@dataclass
class Run:
    calls_per_s: float
    p50_ms: float
    p99_ms: float


async def drive(client: Client, calls: int) -> Run:
    for _ in range(50):
        await client.call_tool("echo", {"text": "warm"})
    latencies = []
    started = time.perf_counter()
    for i in range(calls):
        t0 = time.perf_counter()
        result = await client.call_tool("echo", {"text": f"hello {i}"})
        latencies.append(time.perf_counter() - t0)
        assert not result.is_error
    total = time.perf_counter() - started
    latencies.sort()
    return Run(
        calls / total, statistics.median(latencies) * 1000, latencies[int(len(latencies) * 0.99)] * 1000
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def measure(name: str, transport: str, calls: int) -> Run:
    env = {**os.environ, "PYTHONPATH": str(SOURCES[name])}
    script = str(SERVERS[name])
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=[script, "stdio"], env=env)
        async with Client(params, mode="legacy") as client:
            return await drive(client, calls)
    port = free_port()
    mode = "json" if transport == "http-json" else "sse"
    proc = subprocess.Popen(
        [sys.executable, script, "http", str(port), mode],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            return await drive(client, calls)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transports", default="stdio,http-sse,http-json")
    parser.add_argument("--baseline", type=Path, help="another checkout's src/ to run the mcpkit server on")
    opts = parser.parse_args()
    if opts.baseline is not None:
        SERVERS[BASELINE] = SERVERS["mcpkit"]
        SOURCES[BASELINE] = opts.baseline.resolve()
    transports = opts.transports.split(",")
    best: dict[tuple[str, str], Run] = {}
    paired: dict[tuple[str, str], list[float]] = {}  # per round, calls/s relative to the bare server's
    for rnd in range(opts.rounds):
        for transport in transports:
            this_round: dict[str, Run] = {}
            for name in SERVERS:
                run = this_round[name] = await measure(name, transport, opts.calls)
                key = (name, transport)
                if key not in best or run.calls_per_s > best[key].calls_per_s:
                    best[key] = run
                print(
                    f"round {rnd + 1} {transport:9} {name:17} {run.calls_per_s:7.0f} calls/s "
                    f"p50 {run.p50_ms:5.2f} ms p99 {run.p99_ms:5.2f} ms",
                    file=sys.stderr,
                )
            for name, run in this_round.items():
                ratio = run.calls_per_s / this_round["bare SDK"].calls_per_s
                paired.setdefault((name, transport), []).append(ratio)
    print(
        f"\n{opts.calls} sequential calls x best of {opts.rounds} rounds, official SDK client, Python "
        f"{sys.version.split()[0]}\n"
    )
    print("calls/s, p50 and p99 from each server's best round; the ratios are medians of the per-round")
    print("ratios (each round runs the servers back to back, so noise hits them alike).\n")
    with_base = BASELINE in SERVERS
    extra_head, extra_rule = (" vs baseline |", "---|") if with_base else ("", "")
    print(f"| transport | server | calls/s | p50 ms | p99 ms | vs bare SDK | vs FastMCP |{extra_head}")
    print(f"|---|---|---|---|---|---|---|{extra_rule}")
    for transport in transports:
        for name in SERVERS:
            r = best[(name, transport)]
            vs_bare = statistics.median(paired[(name, transport)])
            vs_fast = statistics.median(
                a / b for a, b in zip(paired[(name, transport)], paired[("FastMCP", transport)], strict=True)
            )
            vs_base = ""
            if with_base:
                ratio = statistics.median(
                    a / b
                    for a, b in zip(paired[(name, transport)], paired[(BASELINE, transport)], strict=True)
                )
                vs_base = f" {ratio:.2f}x |"
            print(
                f"| {transport} | {name} | {r.calls_per_s:.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
                f"{vs_bare:.2f}x | {vs_fast:.2f}x |{vs_base}"
            )


if __name__ == "__main__":
    anyio.run(main)
