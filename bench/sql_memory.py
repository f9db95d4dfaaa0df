"""Peak memory of one execute_query call on huge cells: clipping in the SQL sent vs after fetching.

Each measurement runs `SqlService.query(sql, max_rows=N)` in its own subprocess and reports that
process's peak RSS (VmHWM) minus its RSS just before the call (driver buffers, Python objects and, for
SQLite, the library's own allocations all count). "after fetching" is the round-one behaviour
(`cells=None`: every cell arrives whole and is clipped by shaping); "in SQL" is the default.

    .venv/bin/python bench/sql_memory.py [--engines postgres,mysql,sqlite] [--max-rows 500]
        [--pg postgresql://postgres@127.0.0.1:5432/test] [--mysql mysql://root@127.0.0.1:3306/test]

The "sqlite-held" cases (red team 10, F2) hold many 32 MB values inside SQLite at once, before any
cell is clipped, so both columns measure the same thing; a call stopped by SQLite's heap limit shows
its peak and "(resource)"; so do the printf cases (red team 10, F2 second round: Python copies of
printf's values, before). To measure an earlier version, run it with `PYTHONPATH=<its src>`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_HEX = "hex(randomblob(16000000))"
_COLS12 = ", ".join(f"{_HEX} c{i}" for i in range(12))
_SUM12 = " + ".join(f"length(c{i})" for i in range(12))
_COLS6 = ", ".join(f"{_HEX} c{i}" for i in range(6))
_SUM6 = " + ".join(f"length(c{i})" for i in range(6))
_EMOJI = "printf('%*s', 30000000, '😀')"
_EMOJI16 = "printf('%*s', 16000000, '😀')"

# (name, engine, SQL): the evaluation's worst cases, sized so that "after fetching" stays affordable.
CASES = [
    ("25 x repeat 100 MB", "postgres", "SELECT repeat('x', 100000000) AS t FROM generate_series(1, 25)"),
    ("500 x repeat 1 MB", "postgres", "SELECT g, repeat('y', 1000000) AS t FROM generate_series(1, 500) g"),
    ("25 x 4 MB bytea", "postgres", "SELECT convert_to(repeat('z', 4000000), 'UTF8') AS b FROM generate_series(1, 25)"),  # noqa: E501
    ("100 x REPEAT 16 MB", "mysql", "SELECT REPEAT('x', 16000000) AS t FROM seq_1_to_100"),
    ("500 x REPEAT 1 MB", "mysql", "SELECT seq, REPEAT('y', 1000000) AS t FROM seq_1_to_500"),
    (
        "25 x printf 20 MB",
        "sqlite",
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 25) "
        "SELECT printf('%.*c', 20000000, 'x') AS t FROM g",
    ),
    (
        "25 x randomblob 20 MB",
        "sqlite",
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 25) "
        "SELECT randomblob(20000000) AS b FROM g",
    ),
    ("subquery row of 12 x hex 32 MB", "sqlite-held", f"SELECT {_SUM12} FROM (SELECT {_COLS12} LIMIT 1)"),
    ("subquery row of 6 x hex 32 MB", "sqlite-held", f"SELECT {_SUM6} FROM (SELECT {_COLS6} LIMIT 1)"),
    (
        "window over 30 rows of hex 32 MB",
        "sqlite-held",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 30) SELECT length(y) FROM "
        "(SELECT last_value(x) OVER (ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) y "
        "FROM (SELECT n, hex(randomblob(16000000)) x FROM r)) LIMIT 1",
    ),
    # red team 10, F2 second round: printf's Python wrapper decoded its values (now the C API)
    ("printf('%*s', 3e7, '')", "sqlite-held", "SELECT length(printf('%*s', 30000000, '')) n"),
    ("printf('%*s', 3e7, emoji)", "sqlite-held", f"SELECT length({_EMOJI}) n"),
    ("printf('%s%s', <that>, '')", "sqlite-held", f"SELECT length(printf('%s%s', {_EMOJI}, '')) n"),
    (
        "four nested printf('%s')",
        "sqlite-held",
        f"SELECT length(printf('%s', printf('%s', printf('%s', {_EMOJI})))) n",
    ),
    (
        "printf('%s%s', 2 x 16 MB emoji)",
        "sqlite-held",
        f"SELECT length(printf('%s%s', {_EMOJI16}, {_EMOJI16})) n",
    ),
]  # fmt: skip

# Run only clipped: unclipped, this case took 5.1 GB of RAM on this shared machine in the evaluation.
_TOO_BIG_UNCLIPPED = {"25 x repeat 100 MB"}

_CHILD = """
import json, sys
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
url, sql, rows, clip = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "sql"
def status_kb(key):  # VmHWM: this process's own peak (ru_maxrss would count the parent's)
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
def rss_kb():
    return status_kb("VmRSS:")
engine = SqlEngine(url)
service = SqlService(engine, max_rows=max(rows, 1), timeout_s=120.0, **({} if clip else {"cells": None}))
service.query("SELECT 1", call_id="warm", max_rows=1)
before = rss_kb()
try:
    result, text = service.query(sql, call_id="bench", max_rows=rows)
    failed = ""
except QueryFailed as exc:
    failed = str((exc.data or {}).get("reason"))
peak = status_kb("VmHWM:")
print(json.dumps({"peak_mb": (peak - before) / 1024, "failed": failed}))
"""


def measure(url: str, sql: str, rows: int, clip: str) -> dict[str, Any] | str:
    """Run one call in a fresh subprocess; its peak RSS growth in MB, or why it failed."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, url, sql, str(rows), clip],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1][:80]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", default="postgres,mysql,sqlite")
    parser.add_argument("--max-rows", type=int, default=500)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--mysql", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--skip-unclipped", action="store_true", help="measure only clipping in SQL")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="mcpkit-bench-mem-"))
    sqlite_url = f"sqlite:///{folder / 'empty.db'}"
    import sqlite3

    sqlite3.connect(folder / "empty.db").execute("CREATE TABLE t (a)").connection.close()
    urls = {"postgres": args.pg, "mysql": args.mysql, "sqlite": sqlite_url, "sqlite-held": sqlite_url}
    engines = args.engines.split(",")
    engines += ["sqlite-held"] if "sqlite" in engines else []
    print(f"peak RSS growth of one call, max_rows={args.max_rows} (MB; subprocess per measurement)\n")
    print("| engine | case | clipped in SQL | clipped after fetching (round one) |")
    print("|---|---|---|---|")
    for name, engine, sql in CASES:
        if engine not in engines:
            continue
        after = measure(urls[engine], sql, args.max_rows, "sql")
        skip = args.skip_unclipped or name in _TOO_BIG_UNCLIPPED
        if engine == "sqlite-held":
            before: dict[str, Any] | str = "the same (held before clipping)"
        else:
            before = (
                "not run (5.1 GB in the evaluation)"
                if skip
                else measure(urls[engine], sql, args.max_rows, "off")
            )

        def cell(m: dict[str, Any] | str) -> str:
            if isinstance(m, str):
                return m
            return f"{m['peak_mb']:.1f}" + (f" ({m['failed']})" if m["failed"] else "")

        print(f"| {engine} | {name} | {cell(after)} | {cell(before)} |", flush=True)


if __name__ == "__main__":
    main()
