"""Test helpers: free ports, servers in real subprocesses, and scanning results for leaks."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"server exited with {proc.returncode}: {out[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


@contextlib.contextmanager
def python_server(
    args: Sequence[str], port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `python ARGS` (a server listening on `port`) for the duration of the block."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_for_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def dump(result: Any) -> str:
    """A result as the JSON a client receives, for scanning."""
    if hasattr(result, "model_dump"):
        return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    return json.dumps(result, default=str)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)
