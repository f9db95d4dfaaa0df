"""Red team rtI N2: `serve --no-isolate` still started the SQLite worker zygote (an idle ~100 MB
process for the server's life): `open_sources` built an isolating engine only to read the dialect.
Run in a fresh interpreter (the zygote is one per process); with isolation the zygote is still forked
from the single-threaded server (not a new interpreter, seconds slower)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import argparse, sys
from contextlib import ExitStack
from mcpkit.sql import cli
from mcpkit.sql.assemble import open_sources
from mcpkit.sql.engines.zygote import _Zygote
root = argparse.ArgumentParser()
cli.register(root.add_subparsers())
args = root.parse_args(["sql", "serve", "--dsn", sys.argv[1], "--no-audit", sys.argv[2]])
args.allow, args.allow_function = cli.opt_ins(args)
with ExitStack() as stack:
    open_sources(args, cli._dsns(args), stack)
    print("forked" if _Zygote.forked is not None else "spawned" if _Zygote.process is not None else "none")
"""


def _zygote(path: Path, isolation: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, f"sqlite:///{path}", isolation],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_no_isolate_starts_no_zygote_and_isolate_still_does(tmp_path: Path) -> None:
    path = tmp_path / "z.db"
    sqlite3.connect(path).close()
    assert _zygote(path, "--no-isolate") == "none"
    assert _zygote(path, "--isolate") == "forked"  # still a fork of the single-threaded server
