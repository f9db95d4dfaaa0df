"""Hostile JSON-RPC over stdio and HTTP: the server never dies, answers validly or not at all, stays bounded.

Each generated message is followed by a `ping` probe; the probe's answer proves the server is alive
and every line that came back before it is checked to be well-formed JSON-RPC.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.strategies import messages
from tests.helpers import ROOT, free_port, python_server

# 6,000 over stdio and 2 x 2,500 over HTTP (with and without sessions): 11,000 hostile messages a run.
STDIO_EXAMPLES = 6_000
HTTP_EXAMPLES = 2_500
FUZZ = settings(
    max_examples=STDIO_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"},
    },
}


def check_message(obj: Any) -> None:
    """One message a server may send: a response (result xor error) or a notification/request."""
    assert isinstance(obj, dict), obj
    assert obj.get("jsonrpc") == "2.0", obj
    if "method" in obj:
        assert isinstance(obj["method"], str)
        return
    assert ("result" in obj) != ("error" in obj), obj
    assert "id" in obj
    assert obj["id"] is None or isinstance(obj["id"], (str, int))
    if "error" in obj:
        error = obj["error"]
        assert isinstance(error["code"], int)
        assert isinstance(error["message"], str)
        assert "Traceback" not in error["message"]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class RawStdio:
    """A server subprocess spoken to line by line, without any client library in between."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "weather.py")],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.probes = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def probe(self) -> list[Any]:
        """Send a ping; return every message received until its answer (checked), the answer excluded."""
        self.probes += 1
        probe_id = f"probe-{self.probes}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": probe_id, "method": "ping"}))
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=20)
            except queue.Empty:
                raise AssertionError(f"no answer to {probe_id}: the server is dead or hung") from None
            obj = json.loads(line)
            check_message(obj)
            if obj.get("id") == probe_id:
                return seen
            seen.append(obj)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def stdio_server() -> Iterator[RawStdio]:
    server = RawStdio()
    yield server
    server.close()


@pytest.mark.slow
def test_stdio_before_initialize_is_refused_not_crashed(stdio_server: RawStdio) -> None:
    for method in ("tools/list", "tools/call", "resources/list", "ping"):
        stdio_server.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": f"early-{method}",
                    "method": method,
                    "params": {"name": "forecast", "arguments": {"city": "Oslo"}},
                }
            )
        )
    replies = stdio_server.probe()
    by_id = {r.get("id"): r for r in replies}
    assert "result" not in by_id.get("early-tools/call", {})  # no tool ran before the handshake
    stdio_server.send(json.dumps(INIT))
    stdio_server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    stdio_server.probe()


@pytest.mark.slow
def test_stdio_survives_hostile_messages(stdio_server: RawStdio) -> None:
    stdio_server.probe()
    before = rss_kib(stdio_server.proc.pid)

    @FUZZ
    @given(message=messages)
    def one(message: str) -> None:
        stdio_server.send(message)
        stdio_server.probe()

    one()
    # A legitimate call still works after the storm.
    stdio_server.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "last",
                "method": "tools/call",
                "params": {"name": "forecast", "arguments": {"city": "Oslo"}},
            }
        )
    )
    replies = stdio_server.probe()
    last = [r for r in replies if r.get("id") == "last"]
    if not last:  # it may answer after the probe
        last = [json.loads(stdio_server.lines.get(timeout=10))]
    assert last[0]["result"]["structuredContent"] == {"city": "oslo", "celsius": [3.0]}
    assert stdio_server.proc.poll() is None
    assert rss_kib(stdio_server.proc.pid) - before < 150_000, "server memory grew by more than 150 MB"


@pytest.mark.slow
@pytest.mark.parametrize("stateless", [False, True])
def test_http_survives_hostile_bodies(stateless: bool) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = ["tests/servers/http_app.py", str(port), "--json", *(["--stateless"] if stateless else [])]
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with python_server(args, port) as running, httpx2.Client(timeout=20) as http:
        init = http.post(url, headers=headers, json=INIT)
        if "mcp-session-id" in init.headers:
            headers["mcp-session-id"] = init.headers["mcp-session-id"]
            http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        headers["mcp-protocol-version"] = "2025-11-25"
        before = rss_kib(running.proc.pid)

        @settings(FUZZ, max_examples=HTTP_EXAMPLES)
        @given(message=messages)
        def one(message: str) -> None:
            reply = http.post(url, headers=headers, content=message.encode("utf-8", "surrogatepass"))
            assert reply.status_code < 500, (reply.status_code, reply.text[:300])
            if reply.headers.get("content-type", "").startswith("application/json") and reply.content:
                body = reply.json()
                for obj in body if isinstance(body, list) else [body]:
                    check_message(obj)
            ping = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": "probe", "method": "ping"})
            assert ping.status_code == 200
            assert ping.json()["result"] == {}

        one()
        oversized = http.post(url, headers=headers, content=b"[" + b" " * 2_000_000 + b"]")
        assert oversized.status_code == 413
        assert running.proc.poll() is None
        assert rss_kib(running.proc.pid) - before < 150_000
