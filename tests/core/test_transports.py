"""Real transports: stdio as a subprocess, Streamable HTTP on a real socket, and the Inspector CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import ROOT, free_port, python_server, text_of

WEATHER = str(ROOT / "examples" / "weather.py")
HTTP_SERVER = "import sys; from examples.weather import server; server.run_http(port=int(sys.argv[1]))"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stdio_subprocess_through_official_client(mode: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=[WEATHER], cwd=str(ROOT))
    async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
        tools = {t.name for t in (await client.list_tools()).tools}
        ok = await client.call_tool("forecast", {"city": "Paris", "days": 2})
        bad = await client.call_tool("forecast", {"city": "Atlantis"})
    assert tools == {"forecast", "to_fahrenheit"}
    assert ok.structured_content == {"city": "paris", "celsius": [14.5, 15.0]}
    assert bad.is_error and "TOOL_ERROR" in text_of(bad)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_streamable_http_on_a_real_socket(mode: str) -> None:
    port = free_port()
    with python_server(["-c", HTTP_SERVER, str(port)], port):
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:  # type: ignore[arg-type]
            if mode == "legacy":
                assert client.protocol_version == "2025-11-25"
            tools = (await client.list_tools()).tools
            result = await client.call_tool("forecast", {"city": "Lima"})
    assert [t.name for t in tools] == ["forecast", "to_fahrenheit"]
    assert result.structured_content == {"city": "lima", "celsius": [19.0]}


def _post(port: int, headers: dict[str, str], body: bytes) -> httpx2.Response:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx2.post(f"http://127.0.0.1:{port}/mcp", headers={**base, **headers}, content=body, timeout=10)


def test_http_refuses_rebinding_hosts_foreign_origins_and_non_json() -> None:
    port = free_port()
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    ).encode()
    with python_server(["-c", HTTP_SERVER, str(port)], port):
        assert _post(port, {"Host": "evil.example.com"}, init).status_code == 421
        assert _post(port, {"Origin": "http://evil.example.com"}, init).status_code == 403
        assert _post(port, {"Content-Type": "text/plain"}, init).status_code == 400
        assert _post(port, {"Origin": f"http://127.0.0.1:{port}"}, init).status_code == 200


@pytest.mark.anyio
async def test_http_client_sdk_transport_with_custom_client() -> None:
    port = free_port()
    with python_server(["-c", HTTP_SERVER, str(port)], port):
        async with httpx2.AsyncClient(timeout=10) as http:
            transport = streamable_http_client(f"http://localhost:{port}/mcp", http_client=http)
            async with Client(transport, mode="legacy") as client:
                result = await client.call_tool("to_fahrenheit", {"celsius": 100})
    assert text_of(result) == "212.0 F"


def _inspector(npm_bin: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "PATH": f"{npm_bin}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(npm_bin / "mcp-inspector"), "--cli", sys.executable, WEATHER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data: dict[str, object] = json.loads(proc.stdout)
    return data


@pytest.mark.npm
def test_inspector_cli_lists_and_calls(npm_bin: Path) -> None:
    listed = _inspector(npm_bin, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["forecast", "to_fahrenheit"]  # type: ignore[attr-defined]
    called = _inspector(
        npm_bin,
        "--method",
        "tools/call",
        "--tool-name",
        "forecast",
        "--tool-arg",
        "city=Oslo",
        "--tool-arg",
        "days=2",
    )
    assert called["structuredContent"] == {"city": "oslo", "celsius": [3, 3.5]}
    assert called["isError"] is False
