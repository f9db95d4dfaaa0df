"""Per-call cost of the Telemetry middleware, in process: the chain of one echo call, timed directly.

The protocol benchmark (bench/protocol.py, MCPKIT_BENCH_TELEMETRY=api|sdk) measures it end to end, but on a
shared machine its rounds swing more than this cost; here the same chain runs without Telemetry, with it and
no SDK (what an unconfigured server pays), and with the SDK (spans recorded in memory, metrics aggregated),
interleaved, best of the rounds.

    .venv/bin/python bench/telemetry_overhead.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from pydantic import BaseModel

from mcpkit import Server, Tool
from mcpkit.pipeline import Call
from mcpkit.telemetry import Telemetry


class EchoIn(BaseModel):
    text: str


async def echo(args: EchoIn, ctx: object) -> str:
    return args.text


def _server(middleware: list[Telemetry]) -> Server:
    tool = Tool(name="echo", description="Echo the text.", input=EchoIn, handler=echo)
    return Server("bench", tools=[tool], middleware=middleware)


async def _run(server: Server, calls: int) -> float:
    tool = server._lookup("echo")
    started = time.perf_counter()
    for _ in range(calls):
        call = Call(
            call_id=os.urandom(16).hex(),
            name="echo",
            arguments={"text": "hi"},
            tool=tool,
            make_context=lambda c: None,  # type: ignore[arg-type,return-value]  # the handler ignores it
            identity="bench",
        )
        await server._chain(call)
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    servers = {
        "no Telemetry": _server([]),
        "Telemetry, no SDK": _server([Telemetry()]),
        "Telemetry + SDK": _server(
            [
                Telemetry(
                    tracer_provider=TracerProvider(),
                    meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
                )
            ]
        ),
    }
    best = dict.fromkeys(servers, float("inf"))
    for _ in range(opts.rounds):
        for label, server in servers.items():
            best[label] = min(best[label], asyncio.run(_run(server, opts.calls)))
    base = best["no Telemetry"]
    for label, us in best.items():
        print(f"{label:20} {us:7.1f} us/call  (+{us - base:5.1f} us)")


if __name__ == "__main__":
    main()
