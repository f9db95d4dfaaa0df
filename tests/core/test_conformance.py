"""The official MCP conformance suite against examples/conformance.py over Streamable HTTP."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import free_port, python_server

# Every lifecycle, tools and wire-schema scenario must pass (docs/conformance.md lists the others).
REQUIRED = (
    "server-initialize",
    "ping",
    "logging-set-level",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
SUMMARY = re.compile(r"^[✓✗] (?P<name>[\w-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed", re.MULTILINE)
SINGLE = re.compile(r"^Passed: (?P<passed>\d+)/\d+, (?P<failed>\d+) failed", re.MULTILINE)


def _run(npm_bin: Path, url: str, *args: str) -> dict[str, tuple[int, int]]:
    env = {**os.environ, "PATH": f"{npm_bin}{os.pathsep}{os.environ['PATH']}", "NO_COLOR": "1"}
    proc = subprocess.run(
        [str(npm_bin / "conformance"), "server", "--url", url, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    found = {m["name"]: (int(m["passed"]), int(m["failed"])) for m in SUMMARY.finditer(proc.stdout)}
    if "--scenario" in args and (single := SINGLE.search(proc.stdout)):
        found[args[args.index("--scenario") + 1]] = (int(single["passed"]), int(single["failed"]))
    if not found:
        raise AssertionError(
            f"no conformance summary; stdout: {proc.stdout[-1500:]} stderr: {proc.stderr[-1500:]}"
        )
    return found


@pytest.mark.npm
@pytest.mark.slow
def test_lifecycle_tools_and_wire_schema_scenarios_pass(npm_bin: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server(["examples/conformance.py", str(port)], port):
        results = _run(npm_bin, url)
        results.update(_run(npm_bin, url, "--scenario", "json-schema-2020-12"))
    failing = {name: r for name, r in results.items() if name in REQUIRED and (r[1] or not r[0])}
    assert not failing, f"failing required scenarios: {failing}"
    assert set(REQUIRED) <= set(results), f"scenarios not run: {set(REQUIRED) - set(results)}"
