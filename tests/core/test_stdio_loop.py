"""stdio served by the event loop where stdin/stdout are pipes, the SDK's default otherwise.

The loop's own reader has a line limit the SDK's default has not; a message of several hundred KB
must pass both ways, a handler's print must not reach the wire, and a server whose stdin is a
regular file (which the loop cannot watch) must still answer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mcp import Client, StdioServerParameters

from mcpkit.threads import SWITCH_INTERVAL_S, shorten_gil_waits
from tests.helpers import ROOT, text_of

SERVER = str(ROOT / "tests" / "servers" / "stdio_echo.py")


@pytest.mark.anyio
async def test_large_messages_both_ways_and_stray_prints_over_pipes() -> None:
    params = StdioServerParameters(command=sys.executable, args=[SERVER], cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        for size in (10, 300_000, 2_000_000):
            result = await client.call_tool("blob", {"text": "x" * size, "size": size})
            assert text_of(result) == f"{size}:" + "y" * size


@pytest.mark.anyio
async def test_serving_lowers_the_switch_interval_so_a_handler_thread_waits_less_for_the_gil() -> None:
    params = StdioServerParameters(command=sys.executable, args=[SERVER], cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:  # a fresh interpreter: Python's 5 ms before
        result = await client.call_tool("switch_interval", {})
    assert float(text_of(result)) == SWITCH_INTERVAL_S
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)  # one set lower is never raised
    try:
        shorten_gil_waits()
        assert sys.getswitchinterval() == pytest.approx(0.0002)
    finally:
        sys.setswitchinterval(before)


def test_stdin_from_a_regular_file_falls_back_to_the_sdk_reader() -> None:
    info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": info}]
    path = ROOT / "tests" / "servers" / ".stdin-test.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    try:
        with path.open("rb") as stdin:
            proc = subprocess.run(
                [sys.executable, SERVER], stdin=stdin, capture_output=True, timeout=60, cwd=ROOT, check=False
            )
    finally:
        path.unlink()
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [a.get("id") for a in answers] == [1], proc.stderr.decode()[-2000:]
    assert answers[0]["result"]["serverInfo"]["name"] == "stdio-echo"
