"""`make demo` runs end to end: the SQL server over stdio through the official client, then lint."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT


def test_make_demo_story() -> None:
    proc = subprocess.run(
        [sys.executable, "examples/demo.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tool execute_query" in out
    assert "| Europe |" in out  # the aggregate was answered
    assert "REFUSED: This server is read-only" in out  # the write was refused
    assert "more rows exist" in out  # the long result was capped
    assert "bar chart (800x450 PNG" in out and "the PNG image content" in out  # a chart was drawn
    assert "main.sales_demo: about 3000 rows" in out and "| region | VARCHAR(40) |" in out  # and a profile
    assert "0 errors" in out  # and every client would accept its tools
    story, _, log = out.partition("operator log")
    assert "mcpkit.calls" not in story + proc.stderr  # the story is not interleaved with log lines
    assert '"tool": "execute_query"' in log  # the call record is shown apart
