"""What profile_table, sample_table and create_chart cost on a large table, through the official client.

    python bench/analysis.py [--rows 10000000] [--engines sqlite,postgres,mysql]

Builds one table of `--rows` rows per engine (tagged names, dropped at the end; PostgreSQL and
MariaDB at the test URLs of tests/conftest.py), then times each tool call (median of 3) as a
least-privilege reader. PostgreSQL is measured twice: with `pg_stats` (analyzed) and with
row-level security active for the reader, where pg_stats shows nothing and the profile samples
with TABLESAMPLE. A full `COUNT(*)` of the table is timed beside it for scale.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pymysql
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect

PG = os.environ.get("MCPKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL = os.environ.get("MCPKIT_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
CHART = "SELECT k % 10 AS bucket, COUNT(*) AS n FROM big WHERE id <= 100000 GROUP BY k % 10 ORDER BY 1"


def _median(run: Callable[[], Any], times: int = 3) -> tuple[float, Any]:
    spent, last = [], None
    for _ in range(times):
        started = time.perf_counter()
        last = run()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent) * 1000, last


async def _calls(url: str) -> dict[str, Any]:
    engine = SqlEngine(url)
    service = SqlService(engine, max_rows=500, timeout_s=30.0)
    out: dict[str, Any] = {}
    async with connect(build_server(service)) as client:
        for name, args in (
            ("profile_table", {"table": "big"}),
            ("sample_table", {"table": "big", "rows": 20}),
            ("create_chart", {"query": CHART, "kind": "bar"}),
        ):
            spent = []
            for _ in range(3):
                started = time.perf_counter()
                result = await client.call_tool(name, args)
                spent.append(time.perf_counter() - started)
                assert not result.is_error, result.content
            out[name] = (statistics.median(spent) * 1000, result)
    engine.close()
    return out


def _report(label: str, rows: int, full_scan_ms: float, calls: dict[str, Any]) -> None:
    print(f"\n{label}: {rows:,} rows; COUNT(*) over the table {full_scan_ms:,.0f} ms")
    for name, (ms, result) in calls.items():
        s = result.structured_content or {}
        extra = ""
        if name == "profile_table":
            extra = f"statistics={s['statistics'] or 'none'}; {s['sampling']}; sampled {s['sampled_rows']}"
        elif name == "sample_table":
            extra = f"{s['row_count']} rows; {s['sampling']}"
        else:
            png = next(b for b in result.content if b.type == "image")
            extra = f"{s['kind']}; PNG {len(base64.b64decode(png.data)):,} bytes"
        print(f"  {name:<14} {ms:8.1f} ms  {extra}")


@contextmanager
def _sqlite(rows: int) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.db"
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, k INTEGER, s TEXT, v REAL)")
            db.execute(
                "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)"
                " INSERT INTO big SELECT n, n % 1000, 'v' || (n % 50000), CASE WHEN n % 10 = 0 THEN NULL"
                " ELSE (n * 7919) % 1000 END FROM g",
                (rows,),
            )
        db.close()
        yield f"sqlite:///{path}"


@contextmanager
def _postgres(rows: int, rls: bool) -> Iterator[str]:
    tag = secrets.token_hex(4)
    schema, role = f"mk_bench_{tag}", f"mk_benchr_{tag}"
    admin = make_url(PG).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE ROLE {role} LOGIN")
    try:
        _fill_postgres(admin, schema, role, rows, rls)
        yield make_url(PG).set(username=role, password=None).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
            c.execute(f"DROP SCHEMA {schema} CASCADE")
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


def _fill_postgres(admin: str, schema: str, role: str, rows: int, rls: bool) -> None:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(
            f"CREATE TABLE {schema}.big AS SELECT g AS id, g % 1000 AS k, 'v' || (g % 50000) AS s,"
            f" CASE WHEN g % 10 = 0 THEN NULL ELSE (g::bigint * 7919) % 1000 END AS v"
            f" FROM generate_series(1, {rows}) g"
        )
        c.execute(f"ALTER TABLE {schema}.big ADD PRIMARY KEY (id)")
        c.execute(f"ANALYZE {schema}.big")
        if rls:
            c.execute(f"ALTER TABLE {schema}.big ENABLE ROW LEVEL SECURITY")
            c.execute(f"CREATE POLICY everyone ON {schema}.big FOR SELECT USING (true)")
        c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        c.execute(f"GRANT SELECT ON {schema}.big TO {role}")
        c.execute(f"ALTER ROLE {role} SET search_path = {schema}")


@contextmanager
def _mysql(rows: int) -> Iterator[str]:
    tag = secrets.token_hex(4)
    db, user = f"mk_bench_{tag}", f"mk_benchr_{tag}"
    u = make_url(MYSQL)
    admin = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
    admin.autocommit(True)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
    try:
        with admin.cursor() as c:
            c.execute(f"USE {db}")
            c.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, k INT, s VARCHAR(20), v INT)")
            c.execute(
                "INSERT INTO big SELECT seq, seq % 1000, CONCAT('v', seq % 50000),"
                f" IF(seq % 10 = 0, NULL, (seq * 7919) % 1000) FROM seq_1_to_{rows}"
            )
            c.execute("ANALYZE TABLE big")
            c.fetchall()
            c.execute(f"CREATE USER '{user}'@'%'")
            c.execute(f"GRANT SELECT ON {db}.big TO '{user}'@'%'")
        yield u.set(username=user, password=None, database=db).render_as_string(hide_password=False)
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
            c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


def _count(url: str) -> float:
    engine = SqlEngine(url)
    ms, _ = _median(lambda: engine.execute("SELECT COUNT(*) FROM big", None, 1, 600.0, "bench-count"), 1)
    engine.close()
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--engines", default="sqlite,postgres,mysql")
    args = parser.parse_args()
    engines = args.engines.split(",")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (other sessions share this machine)")
    setups: list[tuple[str, Callable[[], Any]]] = []
    if "sqlite" in engines:
        setups.append(("SQLite (integer key, no sqlite_stat1)", lambda: _sqlite(args.rows)))
    if "postgres" in engines:
        setups.append(("PostgreSQL (analyzed: pg_stats)", lambda: _postgres(args.rows, rls=False)))
        setups.append(("PostgreSQL (RLS active: TABLESAMPLE)", lambda: _postgres(args.rows, rls=True)))
    if "mysql" in engines:
        setups.append(("MariaDB (integer key, index cardinality)", lambda: _mysql(args.rows)))
    for label, setup in setups:
        started = time.perf_counter()
        with setup() as url:
            built = time.perf_counter() - started
            print(f"\n[{label}: table built in {built:.0f} s]", flush=True)
            _report(label, args.rows, _count(url), anyio.run(_calls, url))


if __name__ == "__main__":
    main()
