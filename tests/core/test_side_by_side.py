"""docs/fastmcp.md's claims, measured: the same server in mcpkit and FastMCP 4.x, both driven by the
official SDK client in memory, and the line counts the document states."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
from mcp import Client

from tests.helpers import ROOT, dump, text_of

pytestmark = pytest.mark.anyio

SECRET = "wt-secret-12345"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("forecast", {"city": "Paris", "days": 2}),  # ok
    ("forecast", {"city": "Paris", "days": "2"}),  # a string for an integer
    ("forecast", {"city": "Paris", "admin": True}),  # an unknown argument
    ("forecast", {"city": "Paris", "days": 9}),  # out of range
    ("forecast", {"city": "Atlantis"}),  # the tool's own error
    ("diagnose", {}),  # returns the secret in its text
    ("diagnose", {"verbose": True}),  # an unexpected exception carrying the secret
]


def code_lines(name: str) -> int:
    path = ROOT / "examples" / "side_by_side" / name
    return sum(
        1 for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


async def run(framework: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], dict[str, Any]]:
    monkeypatch.setenv("WEATHER_TOKEN", SECRET)
    module = importlib.reload(importlib.import_module(f"examples.side_by_side.{framework}_version"))
    target = module.server.lowlevel if framework == "mcpkit" else module.server._mcp_server
    async with Client(target, mode="legacy") as client:
        schema = (await client.list_tools()).tools[0].input_schema
        return [await client.call_tool(name, args) for name, args in CALLS], schema


async def test_the_same_server_in_mcpkit_and_fastmcp(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, our_schema = await run("mcpkit", monkeypatch)
    theirs, their_schema = await run("fastmcp", monkeypatch)
    ok, as_string, unknown, out_of_range, own_error, returned, raised = ours
    assert text_of(ok) == "Paris: [14.5, 15.0] C"
    assert as_string.is_error and unknown.is_error and out_of_range.is_error
    assert "input_value" not in text_of(out_of_range) and "pydantic.dev" not in text_of(out_of_range)
    assert text_of(own_error) == "TOOL_ERROR: No forecast for that city; try Paris or Oslo."
    assert SECRET not in dump(returned) and SECRET not in dump(raised)
    assert text_of(raised).startswith("INTERNAL:")
    assert our_schema["properties"]["unit"] == {"type": "string"}

    f_ok, f_as_string, f_unknown, f_out_of_range, f_own_error, f_returned, f_raised = theirs
    assert text_of(f_ok) == "Paris: [14.5, 15.0] C"
    assert not f_as_string.is_error  # lax: "2" became 2
    assert f_unknown.is_error
    assert "input_value=9" in text_of(f_out_of_range)  # the pydantic text, input echoed
    assert text_of(f_own_error) == "No forecast for that city; try Paris or Oslo."
    assert SECRET in text_of(f_returned) and SECRET in text_of(f_raised)  # defaults: both leak
    assert {"type": "null"} in their_schema["properties"]["unit"]["anyOf"]

    doc = (ROOT / "docs" / "fastmcp.md").read_text(encoding="utf-8")
    row = re.search(r"\| lines of code \| (\d+) \| (\d+) \|", doc)
    assert row is not None
    assert (int(row[1]), int(row[2])) == (code_lines("mcpkit_version.py"), code_lines("fastmcp_version.py"))
