"""Peak memory and answer size of one execute_query call on a wide result, through the real server.

The red team's case (issue 10, B1): 500 rows x N columns of 600 four-byte characters. Each
measurement starts `mcpkit sql serve` under `prlimit --as` (an address-space limit, so a server that
runs away fails with MemoryError instead of taking the host), connects the official MCP SDK client
over stdio, resets the server's peak RSS (`/proc/PID/clear_refs` 5), makes one call and reads the
peak (`VmHWM`) minus the RSS just before. The reader accounts are the benchmark's own (`mk_wide_*`),
dropped after.

    .venv/bin/python bench/sql_wide.py [--mcpkit .venv/bin/mcpkit] [--columns 40,100,400,1600]
        [--engines postgres,mysql,sqlite] [--limit-gb 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pymysql
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def wide_sql(engine: str, n: int) -> str:
    """500 rows x `n` columns of 600 four-byte characters, in the engine's dialect."""
    # Bare `x` as the red team wrote it (short enough for the analysis budget at 1,600 columns);
    # MariaDB names each column, as its reproducer did.
    cols = ", ".join(f"x AS x{i}" if engine == "mysql" else "x" for i in range(n))
    if engine == "postgres":
        return (
            "WITH t AS (SELECT repeat(chr(128512), 600) AS x FROM generate_series(1, 500)) "
            f"SELECT {cols} FROM t"
        )
    cell = "REPEAT('\U0001f600', 600)" if engine == "mysql" else "printf('%.600c', char(128512))"
    return (
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 500), "
        f"t AS (SELECT {cell} AS x FROM g) SELECT {cols} FROM t"
    )


@contextmanager
def reader(engine: str) -> Iterator[str]:
    """A least-privilege reader DSN of the benchmark's own, dropped after."""
    tag = secrets.token_hex(4)
    if engine == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="mk_wide_"))
        with sqlite3.connect(folder / "w.db") as c:
            c.execute("CREATE TABLE t (a)")
        yield f"sqlite:///{folder / 'w.db'}"
        return
    if engine == "postgres":
        schema, role = f"mk_wide_{tag}", f"mk_wide_{tag}_r"
        with psycopg.connect(PG_ADMIN, autocommit=True) as c:
            c.execute(f"CREATE SCHEMA {schema}")
            c.execute(f"CREATE TABLE {schema}.t (a int)")
            c.execute(f"CREATE ROLE {role} LOGIN")
            c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
            c.execute(f"GRANT SELECT ON {schema}.t TO {role}")
        try:
            yield f"postgresql://{role}@127.0.0.1:5432/test"
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as c:
                c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
                c.execute(f"DROP SCHEMA {schema} CASCADE")
                c.execute(f"DROP ROLE {role}")
        return
    db, user = f"mk_wide_{tag}", f"mk_wide_{tag}_m"
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.t (a int)")
        c.execute(f"CREATE USER '{user}'@'%'")
        c.execute(f"GRANT SELECT ON {db}.* TO '{user}'@'%'")
    try:
        yield f"mysql://{user}@127.0.0.1:3306/{db}"
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
            c.execute(f"DROP USER '{user}'@'%'")
        admin.close()


def _server_pid() -> int:
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"serve" in cmd:
            return int(entry.name)
    raise RuntimeError("server process not found")


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


async def measure(mcpkit: str, dsn: str, sql: str, limit_gb: float) -> str:
    """One call through the server; a markdown table row's cells."""
    params = StdioServerParameters(
        command="prlimit",
        args=[
            f"--as={int(limit_gb * (1 << 30))}",
            "--",
            mcpkit,
            "sql",
            "serve",
            "--dsn",
            dsn,
            "--pool-size",
            "1",
        ],
    )
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("execute_query", {"query": "SELECT 1 AS one"})
            pid = _server_pid()
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            before = _status_kb(pid, "VmRSS:")
            started = time.perf_counter()
            res = await s.call_tool("execute_query", {"query": sql, "max_rows": 500})
            took = time.perf_counter() - started
            peak = _status_kb(pid, "VmHWM:")
    text = "".join(getattr(c, "text", "") for c in res.content)
    first = text.splitlines()[0][:90] if text else ""
    flag = "error: " if res.is_error else ""
    return f"{(peak - before) / 1024:.0f} | {len(text):,} | {took:.1f} | {flag}{first}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mcpkit", default=".venv/bin/mcpkit")
    parser.add_argument("--columns", default="40,100,400,1600")
    parser.add_argument("--engines", default="postgres,mysql,sqlite")
    parser.add_argument("--limit-gb", type=float, default=3.0)
    args = parser.parse_args()
    print(
        f"one call, 500 rows x N columns of 600 x U+1F600; server under prlimit --as={args.limit_gb:g} GB\n"
    )
    print("| engine | N | peak RSS growth (MB) | text answer (chars) | seconds | first line |")
    print("|---|---|---|---|---|---|")
    for engine in args.engines.split(","):
        with reader(engine) as dsn:
            for n in (int(x) for x in args.columns.split(",")):
                try:
                    row = asyncio.run(measure(args.mcpkit, dsn, wide_sql(engine, n), args.limit_gb))
                except Exception as exc:  # the old code under the limit: the server died
                    row = f"- | - | - | failed: {type(exc).__name__}"
                print(f"| {engine} | {n} | {row} |", flush=True)


if __name__ == "__main__":
    main()
