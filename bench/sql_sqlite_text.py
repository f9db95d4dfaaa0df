"""What SQLite's bounded text functions cost a scan: mcpkit's like()/glob()/instr()/trim() vs SQLite's own.

mcpkit replaces SQLite's LIKE, GLOB, instr(), replace() and the two-argument trims per connection
(`profiles/sqlite_text.py`, docs/security.md): a Python callback per row that asks the call's deadline
first and uses SQLite's own matcher, because SQLite checks its progress handler only between VM
steps and one step of these could run minutes past a timeout. This bench times each search over
every row of a table three ways, in one run:

- mcpkit: `SqlService.query(sql)` (admission, the read-only connection, the bounded functions);
- bounded, bare: the same statement on a plain `sqlite3` connection with only the bounded functions
  installed (`bound_text_functions`): the callbacks' own cost, without admission or shaping;
- sqlite: the same statement on a plain `sqlite3` connection (SQLite's built-ins).

Then one search too large to finish in time (ten LIKEs over a 33 MB value): mcpkit answers TIMEOUT
near its deadline; SQLite's own runs to its end.

    .venv/bin/python bench/sql_sqlite_text.py [--sizes 100000,1000000] [--repeat 5]
        [--data-dir /tmp/mcpkit-bench]
"""

from __future__ import annotations

import argparse
import functools
import logging
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from sql import setup_sqlite  # the bench table of bench/sql.py

SEARCHES = {
    "`note LIKE '%deal 9%'`": "SELECT count(*) FROM {t} WHERE note LIKE '%deal 9%'",
    "`product LIKE 'product 1%'`": "SELECT count(*) FROM {t} WHERE product LIKE 'product 1%'",
    "`note GLOB '*deal 9*'`": "SELECT count(*) FROM {t} WHERE note GLOB '*deal 9*'",
    "`instr(note, 'deal 9')`": "SELECT count(*) FROM {t} WHERE instr(note, 'deal 9') > 0",
    "`rtrim(note, '0123456789')`": "SELECT count(*) FROM {t} WHERE rtrim(note, '0123456789') = note",
    "no search (baseline of the scan)": "SELECT count(*) FROM {t} WHERE units > 250",
}
HUGE = "WITH v(s) AS (SELECT printf('%.*c', 33000000, 'a')) SELECT count(*) FROM v WHERE " + " OR ".join(
    f"s LIKE '%{'a' * 50}{c}%'" for c in "bcdefghijk"
)


def _timed(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    answer = run()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        answer = run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, answer


def _fetch(conn: sqlite3.Connection, sql: str) -> list[Any]:
    return conn.execute(sql).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data-dir", default="/tmp/mcpkit-bench")
    parser.add_argument("--timeout", type=float, default=3.0, help="mcpkit's statement timeout, s")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    from mcpkit.sql import SqlEngine, SqlService
    from mcpkit.sql.profiles.sqlite import MAX_LENGTH
    from mcpkit.sql.profiles.sqlite_text import bound_text_functions

    print("| search, over every row | rows | mcpkit ms | bounded, bare ms | sqlite ms | mcpkit / sqlite |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for n in [int(s) for s in args.sizes.split(",")]:
        path = setup_sqlite(Path(args.data_dir), n)
        service = SqlService(SqlEngine(f"sqlite:///{path}"), timeout_s=600.0, catalog=None)
        bounded = sqlite3.connect(path)
        bound_text_functions(bounded, MAX_LENGTH)
        plain = sqlite3.connect(path)
        for label, template in SEARCHES.items():
            sql = template.format(t=f"rows_{n}")
            ours, (result, _) = _timed(functools.partial(service.query, sql, call_id="bench"), args.repeat)
            bare, got = _timed(functools.partial(_fetch, bounded, sql), args.repeat)
            base, want = _timed(functools.partial(_fetch, plain, sql), args.repeat)
            if not got == want == [tuple(r) for r in result.rows]:
                raise SystemExit(f"{label}: answers differ: {result.rows} / {got} / {want}")
            row = f"| {label} | {n:,} | {ours:,.0f} | {bare:,.0f} | {base:,.0f} | {ours / base:.1f}x |"
            print(row, flush=True)
        bounded.close()
        plain.close()
    timed = SqlService(SqlEngine(f"sqlite:///{path}"), timeout_s=args.timeout, catalog=None)
    t0 = time.perf_counter()
    try:
        timed.query(HUGE, call_id="bench")
        answer = "answered"
    except Exception as exc:  # the refusal the model sees
        answer = type(exc).__name__
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sqlite3.connect(":memory:").execute(HUGE).fetchall()
    base_s = time.perf_counter() - t0
    print(f"\nten LIKEs over 33 MB, timeout {args.timeout:g} s: mcpkit {answer} in {ours_s:.1f} s;", end=" ")
    print(f"SQLite's own ran {base_s:.1f} s")


if __name__ == "__main__":
    main()
