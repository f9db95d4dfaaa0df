"""Peak memory of one execute_query call on huge cells: clipping in the SQL sent vs after fetching.

Each measurement runs `SqlService.query(sql, max_rows=N)` in its own subprocess and reports that
process's peak RSS (VmHWM) minus its RSS just before the call (driver buffers, Python objects and, for
SQLite, the library's own allocations all count). "after fetching" is the round-one behaviour
(`cells=None`: every cell arrives whole and is clipped by shaping); "in SQL" is the default.

    .venv/bin/python bench/sql_memory.py [--engines postgres,mysql,sqlite] [--max-rows 500]
        [--pg postgresql://postgres@127.0.0.1:5432/test] [--mysql mysql://root@127.0.0.1:3306/test]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

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
]  # fmt: skip

# Run only clipped: unclipped, this case took 5.1 GB of RAM on this shared machine in the evaluation.
_TOO_BIG_UNCLIPPED = {"25 x repeat 100 MB"}

_CHILD = """
import json, sys
from mcpkit.sql.engines.engine import SqlEngine
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
result, text = service.query(sql, call_id="bench", max_rows=rows)
peak = status_kb("VmHWM:")
print(json.dumps({"peak_mb": (peak - before) / 1024, "rows": result.row_count, "chars": len(text)}))
"""


def measure(url: str, sql: str, rows: int, clip: str) -> dict[str, float] | str:
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
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
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
    urls = {"postgres": args.pg, "mysql": args.mysql, "sqlite": sqlite_url}
    engines = args.engines.split(",")
    print(f"peak RSS growth of one call, max_rows={args.max_rows} (MB; subprocess per measurement)\n")
    print("| engine | case | clipped in SQL | clipped after fetching (round one) |")
    print("|---|---|---|---|")
    for name, engine, sql in CASES:
        if engine not in engines:
            continue
        after = measure(urls[engine], sql, args.max_rows, "sql")
        skip = args.skip_unclipped or name in _TOO_BIG_UNCLIPPED
        before = (
            "not run (5.1 GB in the evaluation)" if skip else measure(urls[engine], sql, args.max_rows, "off")
        )

        def cell(m: dict[str, float] | str) -> str:
            return m if isinstance(m, str) else f"{m['peak_mb']:.1f}"

        print(f"| {engine} | {name} | {cell(after)} | {cell(before)} |", flush=True)


if __name__ == "__main__":
    main()
