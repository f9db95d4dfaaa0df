"""OpenTelemetry: one span per call with mcpkit's facts, and the call metrics, through the OTel SDK.

The spans and metrics are read with the SDK's in-memory exporter and reader; the Prometheus text
is scraped from a real HTTP server.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from mcpkit import Context, Refused, Server, Tool
from mcpkit.telemetry import Telemetry
from tests.helpers import ROOT, free_port, python_server

pytestmark = pytest.mark.anyio


class Q(BaseModel):
    q: str = "x"


async def ask(args: Q, ctx: Context) -> str:
    if args.q == "no":
        raise Refused("Not that.")
    return args.q


def _server(telemetry: Telemetry) -> Server:
    tool = Tool(name="ask", description="Answer.", input=Q, handler=ask, rate_limit_per_min=3)
    return Server("otel", tools=[tool], middleware=[telemetry])


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


async def test_one_span_per_call_and_the_call_metrics() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    telemetry = Telemetry(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    server = _server(telemetry)
    async with Client(server.lowlevel, mode="legacy") as client:
        for q in ("a", "no", "b", "c"):  # the 4th call is over the limit of 3 a minute
            await client.call_tool("ask", {"q": q})
        await client.call_tool("ask", {"q": 5})  # invalid arguments

    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == ["tools/call ask"] * 5
    assert [s.attributes["mcpkit.outcome"] for s in finished] == [
        "OK",
        "REFUSED",
        "OK",
        "RATE_LIMITED",
        "INVALID_PARAMS",
    ]
    assert all(s.attributes["gen_ai.tool.name"] == "ask" for s in finished)
    assert [s.status.is_ok for s in finished] == [True, False, True, False, False]
    assert all(s.end_time is not None and s.end_time > s.start_time for s in finished)

    points = _points(reader)
    calls = {p.attributes["code"]: p.value for p in points["mcpkit.tool.calls"]}
    assert calls == {"OK": 2, "REFUSED": 1, "RATE_LIMITED": 1, "INVALID_PARAMS": 1}
    errors = {p.attributes["code"]: p.value for p in points["mcpkit.tool.errors"]}
    assert errors == {"REFUSED": 1, "RATE_LIMITED": 1, "INVALID_PARAMS": 1}
    assert sum(p.count for p in points["mcpkit.tool.duration"]) == 5
    assert [p.value for p in points["mcpkit.rate_limit.refusals"]] == [1]
    assert [p.value for p in points["mcpkit.tool.in_flight"]] == [0]


_GLOBAL_PROVIDER = """
import anyio, json
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.core.test_telemetry import _server
from mcpkit.telemetry import Telemetry

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)

async def main():
    async with Client(_server(Telemetry()).lowlevel, mode="legacy") as client:
        await client.call_tool("ask", {"q": "a"})

anyio.run(main)
server_spans = [s for s in spans.get_finished_spans() if s.kind.name == "SERVER"]
calls = [[s.name, dict(s.attributes)] for s in server_spans if s.name.startswith("tools/call")]
print(json.dumps(calls))
"""


def test_with_a_global_provider_the_sdk_span_carries_mcpkit_facts_and_no_second_span_opens() -> None:
    # A process of its own: the global tracer provider can be set once per process.
    out = subprocess.run(
        [sys.executable, "-c", _GLOBAL_PROVIDER], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(found) == 1, found  # the SDK's SERVER span, not a second one of ours
    name, attributes = found[0]
    assert name == "tools/call ask"
    assert attributes["mcp.method.name"] == "tools/call"  # the SDK's own attribute
    assert attributes["mcpkit.outcome"] == "OK"


def test_metrics_scraped_over_http() -> None:
    port = free_port()
    app = "tests/servers/http_app.py"
    with python_server([app, str(port), "--metrics"], port):
        url = f"http://127.0.0.1:{port}"
        with httpx2.Client(timeout=20) as http:
            from tests.transport.http_support import ACCEPT, answer_text, call, open_session

            sid = open_session(f"{url}/mcp", ACCEPT).headers["mcp-session-id"]
            headers = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            assert (
                answer_text(http.post(f"{url}/mcp", headers=headers, json=call(2, "echo", {"text": "hi"})))
                == "hi"
            )
            scrape = http.get(f"{url}/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    text = scrape.text
    calls = re.search(r'^mcpkit_tool_calls_total\{code="OK",[^}]*tool="echo"\} (\S+)$', text, re.M)
    assert calls is not None and float(calls.group(1)) == 1.0, text[-3000:]
    assert re.search(r'^mcpkit_tool_duration_seconds_count\{code="OK",[^}]*tool="echo"\} 1.0$', text, re.M)
    assert re.search(r'^mcpkit_tool_in_flight\{[^}]*tool="echo"\} 0.0$', text, re.M), text[-3000:]


def test_mcpkit_sql_serve_metrics_over_http() -> None:
    from tests.transport.http_support import ACCEPT, VERSION, answer_text, call, open_session

    port = free_port()
    args = ["-m", "mcpkit", "sql", "serve", "--demo", "--transport", "http", "--port", str(port), "--metrics"]
    with python_server(args, port), httpx2.Client(timeout=30) as http:
        url = f"http://127.0.0.1:{port}"
        sid = open_session(f"{url}/mcp", ACCEPT).headers["mcp-session-id"]
        headers = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
        reply = http.post(
            f"{url}/mcp", headers=headers, json=call(2, "execute_query", {"query": "SELECT 1 AS answer_n"})
        )
        assert "answer_n" in answer_text(reply)
        text = http.get(f"{url}/metrics").text
    calls = re.search(r'^mcpkit_tool_calls_total\{code="OK",[^}]*tool="execute_query"\} (\S+)$', text, re.M)
    assert calls is not None and float(calls.group(1)) == 1.0, text[-3000:]


def test_metrics_on_the_mcp_port_ask_for_the_same_token(tmp_path: Path) -> None:
    """`/metrics` on the MCP port is behind the endpoint's own auth (issue 12: it had none)."""
    from tests.transport.http_support import ALICE, bearer

    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    port = free_port()
    with python_server(["tests/servers/http_app.py", str(port), "--metrics", "--tokens", str(tokens)], port):
        url = f"http://127.0.0.1:{port}/metrics"
        with httpx2.Client(timeout=20) as http:
            anonymous = http.get(url)
            wrong = http.get(url, headers={"Authorization": "Bearer not-a-token-0123456789"})
            scrape = http.get(url, headers=bearer(ALICE))
    assert anonymous.status_code == wrong.status_code == 401
    assert "mcpkit_tool" not in anonymous.text + wrong.text
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")


def test_a_metrics_port_of_its_own_on_loopback(tmp_path: Path) -> None:
    """`--metrics-port`: a scraper without a token reads /metrics on a listener of its own, bound to
    127.0.0.1; the MCP port (with its auth) serves no /metrics then, and calls are counted."""
    from tests.transport.http_support import ALICE, VERSION, answer_text, bearer, call, open_session

    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    port, metrics_port = free_port(), free_port()
    args = [
        "tests/servers/http_app.py",
        str(port),
        "--tokens",
        str(tokens),
        "--metrics-port",
        str(metrics_port),
    ]
    with python_server(args, port), httpx2.Client(timeout=20) as http:
        url = f"http://127.0.0.1:{port}"
        sid = open_session(f"{url}/mcp", bearer(ALICE)).headers["mcp-session-id"]
        headers = {**bearer(ALICE), "mcp-session-id": sid, "mcp-protocol-version": VERSION}
        reply = http.post(f"{url}/mcp", headers=headers, json=call(2, "echo", {"text": "hi"}))
        assert answer_text(reply) == "hi"
        on_mcp_port = http.get(f"{url}/metrics", headers=bearer(ALICE))
        scrape = http.get(f"http://127.0.0.1:{metrics_port}/metrics")
        other_path = http.get(f"http://127.0.0.1:{metrics_port}/mcp")
        _need_127_0_0_2()
        with pytest.raises(httpx2.ConnectError):  # bound to 127.0.0.1 only, not to every address
            http.get(f"http://127.0.0.2:{metrics_port}/metrics")
    assert on_mcp_port.status_code == 404
    assert other_path.status_code == 404
    assert scrape.status_code == 200
    calls = re.search(r'^mcpkit_tool_calls_total\{code="OK",[^}]*tool="echo"\} (\S+)$', scrape.text, re.M)
    assert calls is not None and float(calls.group(1)) == 1.0, scrape.text[-3000:]


def _need_127_0_0_2() -> None:
    """127.0.0.2 is a local address on Linux: a listener on 0.0.0.0 answers there, one on 127.0.0.1 not."""
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.2", 0))
        except OSError:
            pytest.skip("127.0.0.2 is not a local address on this machine")


def test_metrics_options_are_checked() -> None:
    from tests.helpers import run_mcpkit

    stdio = run_mcpkit("sql", "serve", "--demo", "--metrics-port", "9464", timeout=60)
    bad_port = run_mcpkit("sql", "serve", "--demo", "--transport", "http", "--metrics-port", "0", timeout=60)
    assert stdio.returncode == bad_port.returncode == 2
    assert "--metrics and --metrics-port need --transport http" in stdio.stderr
    assert "--metrics-port must be a TCP port" in bad_port.stderr
