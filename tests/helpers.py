"""Test helpers: free ports, servers in real subprocesses, and scanning results for leaks."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, running: Running | None = None, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running is not None and running.proc.poll() is not None:
            raise RuntimeError(f"server exited with {running.proc.returncode}: {running.log()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


@dataclass
class Running:
    """A server subprocess and the file its stderr (the operator's log) goes to."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def python_server(args: Sequence[str], port: int, env: dict[str, str] | None = None) -> Iterator[Running]:
    """Run `python ARGS` (a server listening on `port`) for the duration of the block."""
    full_env = {**os.environ, **(env or {})}
    with tempfile.NamedTemporaryFile(prefix="mcpkit-server-", suffix=".log", delete=False) as log_file:
        log_path = Path(log_file.name)
        proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=log_file
        )
    running = Running(proc, log_path)
    try:
        wait_for_port(port, running)
        yield running
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


UNBOUNDED_MEMORY = ("--allow", "unbounded-memory")
"""Serve the shared, unlimited PostgreSQL where the MCP client passes no environment
(`StdioServerParameters` without `env`; elsewhere `$MCPKIT_SQL_ALLOW` from tests/conftest.py)."""


def run_mcpkit(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run `python -m mcpkit ARGS` from the repository root, as a user would; output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "mcpkit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def dump(result: Any) -> str:
    """A result as the JSON a client receives, for scanning."""
    if hasattr(result, "model_dump"):
        return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    return json.dumps(result, default=str)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)
