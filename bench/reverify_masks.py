"""Median call latency with masks: the catalog fingerprint read before and after each call (rt30 F2).

    python bench/reverify_masks.py [--calls 200] [--interval S] [--only postgresql|mariadb]

Creates a scratch database on the local PostgreSQL and MariaDB (`mk_rt30bench_*`, a reader
granted `id, name` of a table with a masked `email`, and a view over it), then runs `SELECT * FROM
pv` through `SqlService` (`--mask`, pool of 1 connection) and prints the median and p90 per engine.
`--interval S` passes `--catalog-check-interval S` (leave it out for the default). Run it with
`PYTHONPATH=<an older checkout>/src` to measure that code.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcpkit.sql import cli as sqlcli
from tests.sql.sql_support import mysql_scratch, pg_scratch

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
MY_URL = "mysql://root@127.0.0.1:3306/test"
_ROWS = ", ".join(f"({i}, 'n{i}', 'secret{i}@x.io')" for i in range(1, 7))


def _calls(dsn: str, view: str, calls: int, interval: float | None) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        masks = Path(tmp) / "masks.yaml"
        masks.write_text("masks:\n  - cust.email\n")
        parser = argparse.ArgumentParser()
        sqlcli.register(parser.add_subparsers(dest="command"))
        extra = [] if interval is None else ["--catalog-check-interval", str(interval)]
        args = parser.parse_args(
            ["sql", "query", "--dsn", dsn, "--mask", str(masks), "--allow", f"view:{view}",
             "--allow", "unbounded-memory", "--allow", "connection-limit", "--pool-size", "1",
             *extra, "SELECT 1"]
        )  # fmt: skip
        args.allow, args.allow_function = sqlcli.opt_ins(args)
        service = sqlcli._service(args, 1000)
        try:
            for _ in range(10):  # warm-up: plans cached, connection open
                service.query("SELECT * FROM pv", call_id="bench", max_rows=100)
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                service.query("SELECT * FROM pv", call_id="bench", max_rows=100)
                times.append((time.perf_counter() - started) * 1000)
            return times
        finally:
            service.engine.close()


def _report(name: str, times: list[float]) -> None:
    times.sort()
    p90 = times[int(len(times) * 0.9)]
    print(f"{name}: median {statistics.median(times):.2f} ms, p90 {p90:.2f} ms ({len(times)} calls)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--interval", type=float, default=None)
    p.add_argument("--only", choices=("postgresql", "mariadb"), default=None)
    a = p.parse_args()
    if a.only != "mariadb":
        _postgresql(a)
    if a.only != "postgresql":
        _mariadb(a)


def _postgresql(a: argparse.Namespace) -> None:
    with pg_scratch(PG_URL, "rt30bench") as db:
        db.admin.execute(
            f"CREATE TABLE cust (id int PRIMARY KEY, name text, email text); INSERT INTO cust VALUES {_ROWS};"
            f" GRANT USAGE ON SCHEMA public TO {db.reader}; GRANT SELECT (id, name) ON cust TO {db.reader};"
            f" CREATE VIEW pv AS SELECT id, name AS tag FROM cust; GRANT SELECT ON pv TO {db.reader};"
        )
        _report("postgresql", _calls(db.reader_url, "public.pv", a.calls, a.interval))


def _mariadb(a: argparse.Namespace) -> None:
    with mysql_scratch(MY_URL, "rt30bench") as my:
        r = f"'{my.reader}'@'%'"
        with my.admin.cursor() as c:
            c.execute(f"CREATE TABLE {my.db}.cust (id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(80))")
            c.execute(f"INSERT INTO {my.db}.cust VALUES {_ROWS}")
            c.execute(f"GRANT SELECT (id, name) ON {my.db}.cust TO {r}")
            c.execute(
                f"CREATE SQL SECURITY DEFINER VIEW {my.db}.pv AS SELECT id, name AS tag FROM {my.db}.cust"
            )
            c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.pv TO {r}")
        _report("mariadb", _calls(my.reader_url, f"{my.db}.pv", a.calls, a.interval))


if __name__ == "__main__":
    main()
