"""Backend memory of one PostgreSQL call holding N large aggregates (string_agg, array_agg, json_agg,
jsonb_agg) over one table, sent through `SqlService.query` with the session mcpkit sets.

A scratch database gets `t`: `--rows` rows of about 1 KB (50 MB by default). For N = 1..8 distinct
aggregates over all of it, the call runs while a thread samples the backend's private memory
(`RssAnon` in /proc/<pid>/status, every 5 ms: shared buffers are not counted) and reports its peak
growth over the backend's idle size. Needs the server on this host (for /proc) and a superuser URL.

    .venv/bin/python bench/sql_aggregates.py [--pg postgresql://postgres@127.0.0.1:5432/test]
        [--rows 50000] [--max 8] [--prefix mk_aggbench] [--each]

To measure an earlier version, run it with `PYTHONPATH=<its src>`.
"""

from __future__ import annotations

import argparse
import secrets
import threading
import time
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService

_AGGREGATES = [
    "string_agg(body, ',')",
    "array_agg(body)",
    "json_agg(body)",
    "jsonb_agg(body)",
    "string_agg(body, ';')",
    "array_agg(body || '5')",
    "json_agg(body || '6')",
    "jsonb_agg(body || '7')",
]


def _anon_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


def _sample(admin_url: str, label: str, done: threading.Event, out: dict[str, int]) -> None:
    with psycopg.connect(admin_url, autocommit=True) as c:
        pid = None
        while pid is None and not done.is_set():
            query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            row = c.execute(query, [label]).fetchone()
            pid = row[0] if row else None
            if pid is None:
                time.sleep(0.002)
        if pid is None:
            return
        out["base"] = out["peak"] = _anon_kb(pid)
        while not done.is_set():
            out["peak"] = max(out["peak"], _anon_kb(pid))
            time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--max", type=int, default=8)
    parser.add_argument("--prefix", default="mk_aggbench")
    parser.add_argument("--each", action="store_true", help="also each aggregate alone")
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    db, reader = f"{args.prefix}_{tag}", f"{args.prefix}_{tag}_r"
    base = make_url(args.pg)
    admin_db = base.set(database=db).render_as_string(hide_password=False)
    with psycopg.connect(args.pg, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'pw'")
    try:
        with psycopg.connect(admin_db, autocommit=True) as c:
            c.execute(
                "CREATE TABLE t AS SELECT g AS id, repeat(md5(g::text), 31) AS body"
                f" FROM generate_series(1, {int(args.rows)}) g"
            )
            c.execute(f"GRANT SELECT ON t TO {reader}")
            size = c.execute("SELECT sum(octet_length(body)) FROM t").fetchone()
        print(f"t: {args.rows} rows, {size[0] / 1e6:.1f} MB of text\n")
        print("| aggregates | backend peak growth | answer |\n|---:|---:|---|")
        url = base.set(drivername="postgresql+psycopg", database=db, username=reader, password="pw")
        engine = SqlEngine(url.render_as_string(hide_password=False))
        service = SqlService(engine, timeout_s=60)
        try:
            cases = [(str(n), _AGGREGATES[:n]) for n in range(1, args.max + 1)]
            cases += [(a, [a]) for a in _AGGREGATES[:4]] if args.each else []
            for n, aggregates in cases:
                sql = "SELECT " + ", ".join(f"{a} AS a{i}" for i, a in enumerate(aggregates)) + " FROM t"
                call_id = f"agg{secrets.token_hex(6)}"
                done, out = threading.Event(), {}
                sampler = threading.Thread(target=_sample, args=(admin_db, f"mcpkit:{call_id}", done, out))
                sampler.start()
                try:
                    service.query(sql, call_id=call_id)
                    answer = "answered"
                except QueryFailed as exc:
                    answer = f"{exc.kind}: {exc.message}"
                except Refused as exc:
                    answer = f"refused ({exc.data['reason']})"
                finally:
                    done.set()
                    sampler.join()
                growth = (out.get("peak", 0) - out.get("base", 0)) / 1024
                print(f"| {n} | {growth:,.0f} MB | {answer} |")
        finally:
            engine.close()
    finally:
        with psycopg.connect(args.pg, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


if __name__ == "__main__":
    main()
