"""execute_query with the default cap vs a fetch-everything baseline, on 10^4, 10^6 and 10^7 rows.

For each engine (PostgreSQL, SQLite) and table size, two queries an agent writes when it looks at a
table: `SELECT * FROM t` and `SELECT * FROM t ORDER BY revenue DESC`. Measured:

- mcpkit: `SqlService.query(sql, max_rows=25)`, the path of `execute_query` (admission, the cap
  pushed into the SQL as LIMIT 26, a fresh read-only connection, shaping, markdown).
- baseline: what the simple reference servers do: run the text as written, `fetchall()`, and
  return `json.dumps` of a list of row objects.

Each measurement runs in its own subprocess, so peak memory is that process's peak RSS (driver
buffers included) minus its RSS before the first query. Latency is the median of `--repeat` runs
after one warm-up. Bytes compare our markdown with the JSON array of row objects for the same rows.

    .venv/bin/python bench/sql.py [--sizes 10000,1000000,10000000] [--engines postgres,sqlite]
        [--pg postgresql://postgres@127.0.0.1:5432/test] [--data-dir /tmp/mcpkit-bench] [--repeat 5]

`--searches` instead times the string searches admission bounds (`bound_searches`) on PostgreSQL,
one table of `--sizes` rows each: mcpkit as sent (guarded), mcpkit with that pass left out
(unguarded), and the baseline (the text as written); then single searches too large to finish in
time, which mcpkit answers `resource` before it starts and the baseline runs to its end. The pg_trgm
rows need the extension in the `--pg` database (skipped, and said so, without it).

`--guards` times ordinary analytical queries that carry admission's size guards (a LIKE over a
computed pattern, casts of computed text, a pad to a computed width), and the guarded worst cases,
each through mcpkit as sent (guarded) and with `bound_searches` left out (unguarded), as a ratio.
`--role` names the read-only role the bench creates (default `mcpkit_bench_ro`).
"""

from __future__ import annotations

import argparse
import json
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

SCHEMA = "mcpkit_bench"
ROLE = "mcpkit_bench_ro"
QUERIES = {"scan": "SELECT * FROM {t}", "top-n": "SELECT * FROM {t} ORDER BY revenue DESC"}
CAP = 25


# --- data ---------------------------------------------------------------------------------------


def setup_postgres(admin_url: str, n: int) -> str:
    """Create mcpkit_bench.rows_<n> (if missing) and a read-only role; return that role's URL."""
    table = f"{SCHEMA}.rows_{n}"
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone():
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
        if c.execute("SELECT to_regclass(%s)", [table]).fetchone() == (None,):
            started = time.monotonic()
            regions = "ARRAY['North America','Europe','Asia Pacific','Latin America','Middle East & Africa']"
            c.execute(
                f"CREATE TABLE {table} AS SELECT g AS id, ({regions})[1 + g % 5] AS region,"
                " 'Product ' || (g % 97) AS product, (g::bigint * 7919) % 500 AS units,"
                " round(((g::bigint * 104729) % 1000000) / 100.0, 2)::numeric(12, 2) AS revenue,"
                f" md5(g::text) || ' note about deal ' || g AS note FROM generate_series(1, {int(n)}) g"
            )
            c.execute(f"ANALYZE {table}")
            print(f"  created {table} in {time.monotonic() - started:.0f} s", file=sys.stderr)
        c.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {ROLE}")
        c.execute(f"GRANT SELECT ON {table} TO {ROLE}")
    user_at = admin_url.split("://", 1)[1].split("@", 1)
    return f"postgresql://{ROLE}@{user_at[1] if len(user_at) == 2 else user_at[0]}"


def setup_sqlite(folder: Path, n: int) -> Path:
    """Create <folder>/rows_<n>.db (if missing) with the same columns."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rows_{n}.db"
    if not path.exists():
        started = time.monotonic()
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        conn.execute(
            f"CREATE TABLE rows_{n} (id INTEGER PRIMARY KEY, region TEXT, product TEXT, units INTEGER,"
            " revenue NUMERIC, note TEXT)"
        )
        conn.execute(
            f"INSERT INTO rows_{n} WITH RECURSIVE c(g) AS"
            f" (SELECT 1 UNION ALL SELECT g + 1 FROM c WHERE g < {n})"
            " SELECT g, CASE g % 5 WHEN 0 THEN 'North America' WHEN 1 THEN 'Europe'"
            " WHEN 2 THEN 'Asia Pacific' WHEN 3 THEN 'Latin America' ELSE 'Middle East & Africa' END,"
            " 'Product ' || (g % 97),"
            " (g * 7919) % 500, round(((g * 104729) % 1000000) / 100.0, 2),"
            " printf('%08x note about deal %d', (g * 2654435761) % 4294967296, g) FROM c"
        )
        conn.commit()
        conn.close()
        tmp.rename(path)
        print(f"  created {path} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return path


# --- one measurement (runs in a subprocess) --------------------------------------------------


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _baseline(url: str, sql: str) -> tuple[str, int]:
    if url.startswith("sqlite"):
        conn: Any = sqlite3.connect(url.split("///", 1)[1])
    else:
        conn = psycopg.connect(url)
        conn.read_only = True
    cur = conn.cursor()
    cur.execute(sql)
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    text = json.dumps([dict(zip(names, r, strict=True)) for r in rows], default=str)
    conn.rollback()
    conn.close()
    return text, len(rows)


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one (engine, size, query, method) measurement; return latency, peak memory and bytes."""
    import logging

    logging.disable(logging.WARNING)
    from mcpkit.sql import SqlEngine, SqlService

    sql, url, repeat = spec["sql"], spec["url"], spec["repeat"]
    start_rss = _rss_kb()
    times: list[float] = []
    out: dict[str, Any] = {}
    if spec["method"] == "mcpkit":
        engine = SqlEngine(url)
        service = SqlService(engine, timeout_s=600.0, catalog=None)
        for i in range(repeat + 1):
            t0 = time.perf_counter()
            result, text = service.query(sql, call_id="bench", max_rows=CAP)
            if i:
                times.append(time.perf_counter() - t0)
        rows_json = json.dumps([dict(zip(result.columns, r, strict=True)) for r in result.rows], default=str)
        out.update(
            rows=result.row_count, markdown_bytes=len(text.encode()), json_bytes=len(rows_json.encode())
        )
        engine.close()
    else:
        limit = int(spec["mem_limit_gb"] * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # keep a shared machine alive
        for i in range(repeat + 1):
            t0 = time.perf_counter()
            try:
                text, n = _baseline(url, sql)
            except Exception as exc:  # out of memory under the limit
                out.update(rows=0, failed=f"{type(exc).__name__} at the {spec['mem_limit_gb']:g} GB limit")
                times = [time.perf_counter() - t0]
                break
            if i:
                times.append(time.perf_counter() - t0)
            out.update(rows=n, json_bytes=len(text.encode()))
            del text
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out.update(ms=statistics.median(times) * 1000, peak_mb=max(0, peak_kb - start_rss) / 1024)
    return out


def _in_subprocess(spec: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- the run ------------------------------------------------------------------------------------


def _fmt_ms(ms: float) -> str:
    return f"{ms:,.1f}" if ms < 100 else f"{ms:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,1000000,10000000")
    parser.add_argument("--engines", default="postgres,sqlite")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--data-dir", default="/tmp/mcpkit-bench")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline-repeat", type=int, default=3)
    parser.add_argument("--mem-limit-gb", type=float, default=6.0, help="address-space cap of the baseline")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--searches", action="store_true", help="guarded vs unguarded string searches")
    parser.add_argument("--guards", action="store_true", help="what the size guards cost, and their refusals")
    parser.add_argument("--role", default="mcpkit_bench_ro", help="the read-only role the bench creates")
    args = parser.parse_args()
    global ROLE
    ROLE = args.role
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return
    if args.searches:
        searches(args.pg, [int(s) for s in args.sizes.split(",")], args.repeat)
        return
    if args.guards:
        guards(args.pg, [int(s) for s in args.sizes.split(",")], args.repeat)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        "| engine | rows in table | query | mcpkit ms | baseline ms | mcpkit peak MB | baseline peak MB |"
        " rows returned (mcpkit / baseline) |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |")
    sizes_seen: list[dict[str, Any]] = []
    for engine in args.engines.split(","):
        for n in sizes:
            if engine == "postgres":
                url, table = setup_postgres(args.pg, n), f"{SCHEMA}.rows_{n}"
            else:
                url, table = f"sqlite:///{setup_sqlite(Path(args.data_dir), n)}", f"rows_{n}"
            for label, template in QUERIES.items():
                sql = template.format(t=table)
                ours = _in_subprocess({"method": "mcpkit", "url": url, "sql": sql, "repeat": args.repeat})
                base_repeat = args.baseline_repeat if n < 10**7 else 1
                base = _in_subprocess(
                    {
                        "method": "baseline",
                        "url": url,
                        "sql": sql,
                        "repeat": base_repeat,
                        "mem_limit_gb": args.mem_limit_gb,
                    }
                )
                base_rows = base.get("failed") or f"{base['rows']:,}"
                print(
                    f"| {engine} | {n:,} | {label} | {_fmt_ms(ours['ms'])} | {_fmt_ms(base['ms'])} |"
                    f" {ours['peak_mb']:.1f} | {base['peak_mb']:,.0f} | {ours['rows']} / {base_rows} |",
                    flush=True,
                )
                sizes_seen.append(ours)
    last = sizes_seen[-1]
    print(
        f"\nbench table, {last['rows']} rows: markdown {last['markdown_bytes']:,} bytes"
        f" vs JSON array of row objects {last['json_bytes']:,}"
        f" ({last['markdown_bytes'] / last['json_bytes']:.0%})"
    )
    bytes_on_demo(Path(args.data_dir))


def bytes_on_demo(folder: Path) -> None:
    """Bytes of the same 25 demo rows: our markdown, JSON of the shaped rows, JSON of the raw rows."""
    import logging

    logging.disable(logging.WARNING)
    from mcpkit.sql import SqlEngine, SqlService, write_demo_sqlite

    path = write_demo_sqlite(folder / "demo.db", overwrite=True)
    engine = SqlEngine(f"sqlite:///{path}")
    service = SqlService(engine, catalog=None)
    print("\n| demo query (25 rows) | markdown bytes | JSON of shaped rows | JSON of raw rows (reference) |")
    print("| --- | ---: | ---: | ---: |")
    for sql in (
        "SELECT region, product, year, quarter, units, revenue FROM sales_demo ORDER BY id",
        "SELECT * FROM sales_demo ORDER BY id",
        "SELECT * FROM product_vectors ORDER BY id",
    ):
        result, text = service.query(sql, call_id="bytes", max_rows=CAP)
        shaped = json.dumps([dict(zip(result.columns, r, strict=True)) for r in result.rows], default=str)
        raw, _ = _baseline(f"sqlite:///{path}", sql + f" LIMIT {CAP}")
        print(f"| `{sql}` | {len(text.encode()):,} | {len(shaped.encode()):,} | {len(raw.encode()):,} |")
    engine.close()


# --- --searches: bounded string searches, guarded and not ------------------------------------------

# Over every row (a computed needle, so each is guarded), and single searches too large to finish in
# time (pg_trgm's rows need the extension).
SEARCHES = {
    "LIKE '%' || product || '%'": "SELECT count(*) AS n FROM {t} WHERE note LIKE '%' || product || '%'",
    "ILIKE '%' || region || '%'": "SELECT count(*) AS n FROM {t} WHERE note ILIKE '%' || region || '%'",
    "strpos(note, product)": "SELECT count(*) AS n FROM {t} WHERE strpos(note, product) > 0",
    "btrim(note, product)": "SELECT count(*) AS n FROM {t} WHERE btrim(note, product) <> note",
    "string_to_array(note) @> ARRAY[region]": "SELECT count(*) AS n FROM {t}"
    " WHERE string_to_array(note, ' ') @> ARRAY[region]",
    "trgm: note % product": "SELECT count(*) AS n FROM {t} WHERE note % product",
    "trgm: product <% note": "SELECT count(*) AS n FROM {t} WHERE product OPERATOR(public.<%) note",
    "trgm: note <-> product": "SELECT max(note <-> product) AS d FROM {t}",
}
LARGE_SEARCHES = {
    "LIKE over 1 MB, 3 KB pattern": "SELECT repeat('a', 1000000) LIKE '%' || repeat('a', 3000) || 'b%' AS m",
    "btrim of 1 MB by 3 KB": "SELECT length(btrim(repeat('a', 1000000), repeat('b', 3000) || 'a')) AS n",
    "jsonb @> over 20,000 elements": "SELECT j @> k AS c FROM (SELECT jsonb_agg(g) AS j,"
    " jsonb_agg(g ORDER BY g DESC) AS k FROM generate_series(1, 20000) g) s",
    "trgm: <<-> over 60 KB": "SELECT s OPERATOR(public.<<->) s AS d"
    " FROM (SELECT string_agg(md5(g::text), ' ') AS s FROM generate_series(1, 1800) g) x",
}


def _timed(run: Any, repeat: int) -> tuple[float, str]:
    times, outcome = [], "answered"
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        try:
            run()
        except Exception as exc:
            outcome = getattr(exc, "kind", type(exc).__name__)
        if i or not repeat:  # after one warm-up (the plan cache's, the connection's)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, outcome


def _via(admission: Any, service: Any, sql: str, passes: tuple[Any, ...]) -> Any:
    """A run of `sql` through `service` admitted with `passes` (then the default passes again)."""
    default = admission.PASSES

    def run() -> None:
        admission.PASSES = passes
        try:
            service.query(sql, call_id="bench", max_rows=CAP)
        finally:
            admission.PASSES = default

    return run


def searches(admin_url: str, sizes: list[int], repeat: int) -> None:
    """Print the `--searches` tables (docs/benchmarks.md, "Bounded searches, before and after")."""
    import logging

    logging.disable(logging.WARNING)
    import importlib

    from mcpkit.sql import SqlEngine, SqlService
    from mcpkit.sql.admission.bound_searches import bound_searches

    admission: Any = importlib.import_module("mcpkit.sql.admission.admit")  # the package exports admit()

    with psycopg.connect(admin_url, autocommit=True) as c:
        trgm = c.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone() is not None
    if not trgm:
        print("pg_trgm is not installed in the --pg database: its rows are skipped\n")
    guarded_passes = admission.PASSES
    unguarded_passes = tuple(p for p in guarded_passes if p is not bound_searches)

    def via(service: Any, sql: str, passes: tuple[Any, ...]) -> Any:
        return _via(admission, service, sql, passes)

    print("| search, over every row | rows | mcpkit guarded ms | mcpkit unguarded ms | baseline ms |", end="")
    print(" guard cost |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for n in sizes:
        url = setup_postgres(admin_url, n)
        engine = SqlEngine(url)
        # one service each: a plan admitted with or without the pass is cached per service
        service = SqlService(engine, timeout_s=600.0, catalog=None)
        bare = SqlService(engine, timeout_s=600.0, catalog=None)
        for label, template in SEARCHES.items():
            if label.startswith("trgm") and not trgm:
                continue
            sql = template.format(t=f"{SCHEMA}.rows_{n}")
            guarded, _ = _timed(via(service, sql, guarded_passes), repeat)
            unguarded, _ = _timed(via(bare, sql, unguarded_passes), repeat)
            base, _ = _timed(lambda sql=sql, url=url: _baseline(url, sql), repeat)
            print(
                f"| {label} | {n:,} | {_fmt_ms(guarded)} | {_fmt_ms(unguarded)} | {_fmt_ms(base)} |"
                f" {guarded / unguarded - 1:+.0%} |",
                flush=True,
            )
        engine.close()
    url = setup_postgres(admin_url, sizes[0])
    engine = SqlEngine(url)
    service = SqlService(engine, timeout_s=600.0, catalog=None)
    print("\n| one search too large | mcpkit guarded | baseline (runs to its end) |\n| --- | ---: | ---: |")
    for label, sql in LARGE_SEARCHES.items():
        if label.startswith("trgm") and not trgm:
            continue
        ours, outcome = _timed(via(service, sql, guarded_passes), 1)
        base, _ = _timed(lambda sql=sql: _baseline(url, sql), 0)
        print(f"| {label} | {outcome} in {_fmt_ms(ours)} ms | {base / 1000:,.1f} s |", flush=True)
    engine.close()


# --- --guards: what the size guards cost an ordinary query, and their refusals ---------------------

# Ordinary analytical queries whose operands are computed per row, so each carries guards: a LIKE
# over a computed pattern, casts of computed text (each operand held once in a one-row subquery),
# a pad to a computed width.
GUARDED_QUERIES = {
    "report: LIKE over a computed pattern": "SELECT region, count(*) AS deals, sum(revenue) AS revenue"
    " FROM {t} WHERE note LIKE '%' || region || '%' OR units > 250 GROUP BY region ORDER BY revenue DESC",
    "casts of computed text": "SELECT sum((units || '0')::int) AS s,"
    " count(*) FILTER (WHERE (id::text || '')::bigint % 7 = 0) AS sevens FROM {t}",
    "lpad to a computed width": "SELECT max(lpad(product, (20 + units % 5)::int)) AS p FROM {t}",
}
# Worst cases the guards refuse (the unguarded SQL builds or parses the value, then fails or answers).
GUARDED_WORST = {
    "cast of a column and 50 MB of text": "SELECT (region || repeat('x', 50000000))::int AS n"
    " FROM {t} LIMIT 1",
    "a 65 MB value concatenated 4 times": "SELECT length(r || r || r || r) AS n"
    " FROM (SELECT repeat(region, 5000000) AS r FROM {t} LIMIT 1) AS s",
    "LIKE over 1 MB, 3 KB pattern": LARGE_SEARCHES["LIKE over 1 MB, 3 KB pattern"],
}


def guards(admin_url: str, sizes: list[int], repeat: int) -> None:
    """Print the `--guards` tables (docs/benchmarks.md, "What the size guards cost")."""
    import logging

    logging.disable(logging.WARNING)
    import importlib

    from mcpkit.sql import SqlEngine, SqlService
    from mcpkit.sql.admission.bound_searches import bound_searches

    admission: Any = importlib.import_module("mcpkit.sql.admission.admit")
    guarded_passes = admission.PASSES
    unguarded_passes = tuple(p for p in guarded_passes if p is not bound_searches)
    print("| query | rows | guarded ms | unguarded ms | guarded / unguarded |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for n in sizes:
        url = setup_postgres(admin_url, n)
        engine = SqlEngine(url)
        service = SqlService(engine, timeout_s=600.0, catalog=None)
        bare = SqlService(engine, timeout_s=600.0, catalog=None)  # plans are cached per service
        for label, template in {**GUARDED_QUERIES, **GUARDED_WORST}.items():
            sql = template.format(t=f"{SCHEMA}.rows_{n}")
            times = 1 if label in GUARDED_WORST else repeat
            ours, outcome = _timed(_via(admission, service, sql, guarded_passes), times)
            theirs, plain = _timed(_via(admission, bare, sql, unguarded_passes), times)
            shown = "" if outcome == plain == "answered" else f" ({outcome} / {plain})"
            print(
                f"| {label}{shown} | {n:,} | {_fmt_ms(ours)} | {_fmt_ms(theirs)} | {ours / theirs:.2f} |",
                flush=True,
            )
        engine.close()


if __name__ == "__main__":
    main()
