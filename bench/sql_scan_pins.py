"""What pinning the scan order of masked tables costs a call (`mcpkit.sql.scanpins`, docs/masking.md).

    python bench/sql_scan_pins.py [--calls 5] [--only sqlite|postgresql|mariadb] [--show-sql]

Per engine, two scratch databases (`pinbench_*`, dropped at the end) hold `customers` (20,000 rows:
`id` key, `name`, `city`, `email`; an index on `name`) and `orders` (100,000 rows, an index on
`customer_id`); in the first `customers` also has an index on `email`. Five analyst queries run
through `SqlService.query` (the path of the MCP tool `query`), interleaved call by call, in three
configurations of the server:

    no masks   first database, no `--mask`: no pin
    pinned     first database, `--mask customers.email`: the index on email makes the pins apply
               (MariaDB `USE INDEX (visible)`, PostgreSQL index scans off, SQLite `NOT INDEXED`)
    unpinned   second database (no index on email), same mask: no pin (PostgreSQL since pincost:
               index scans kept, no masked index in reach)
    all off    PostgreSQL only: unpinned's server with every masked call's index scans off, as
               before pincost (`IndexReach(always=True)`), side by side in the same run

and prints the median and p90 per call (after 3 warm-up calls each), the ratio to "no masks", and
pinned / unpinned: the pins' own share (the rest is the masking analysis's rewriting, e.g. the
visible order it gives a limited or EXISTS block; `--show-sql` prints what each sends).
PostgreSQL 15 at 127.0.0.1:5432 and MariaDB at 127.0.0.1:3306 (the test servers) read as a login
granted the visible columns only, as `serve --mask` requires.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcpkit.errors import Refused
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.profiles.scan_order import IndexReach
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin, pg_admin

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
MY_URL = "mysql://root@127.0.0.1:3306/test"
CUSTOMERS, ORDERS = 20_000, 100_000
CONFIGS = ("no masks", "pinned", "unpinned", "all off")

QUERIES = {
    "point lookup by name": "SELECT id, name, city FROM customers WHERE name = 'c12345'",
    "selective join": "SELECT c.name, o.amount FROM orders o JOIN customers c ON c.id = o.customer_id"
    " WHERE o.id BETWEEN 500 AND 520",
    "EXISTS semi-join": "SELECT count(*) AS n FROM customers c WHERE EXISTS"
    " (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > 990)",
    "GROUP BY id ORDER BY id LIMIT 10": "SELECT c.id, count(*) AS n FROM customers c"
    " JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY c.id LIMIT 10",
    "full aggregate by city": "SELECT c.city, count(*) AS n, sum(o.amount) AS total FROM customers c"
    " JOIN orders o ON o.customer_id = c.id GROUP BY c.city ORDER BY c.city",
}

# Portable row expressions over a sequence number `n` (email out of id order, orders spread).
_CUSTOMER = "n, 'c' || n, 'city' || (n % 50), substr(md5(n::text), 1, 12) || '@x.io'"
_MY_CUSTOMER = "n, concat('c', n), concat('city', n % 50), concat(substr(md5(n), 1, 12), '@x.io')"
_ORDER = "n, 1 + (n * 7919) % 20000, (n * 37) % 1000"  # integer amounts: a float sum is refused


def _service(dsn: str, mask: Path | None) -> SqlService:
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    masks = ["--mask", str(mask)] if mask else []
    args = parser.parse_args(
        ["sql", "query", "--dsn", dsn, *masks, "--allow", "unbounded-memory", "--allow", "connection-limit",
         "--pool-size", "1", "SELECT 1"]
    )  # fmt: skip
    return sqlcli._service(args, 1000)


def _call(service: SqlService, sql: str, show: str | None = None) -> float | None:
    started = time.perf_counter()
    try:
        service.query(sql, call_id="pinbench", max_rows=100, note=_show(show) if show else None)
    except Refused as exc:
        if show:
            print(f"  {show}: refused: {exc}")
        return None
    return (time.perf_counter() - started) * 1000


def _measure(engine: str, dsns: dict[str, str], calls: int, show_sql: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mask = Path(tmp) / "masks.yaml"
        mask.write_text("masks:\n  - customers.email\n")
        services = {
            "no masks": _service(dsns["pins"], None),
            "pinned": _service(dsns["pins"], mask),
            "unpinned": _service(dsns["free"], mask),
        }
        if engine == "postgresql":
            services["all off"] = _service(dsns["free"], mask)
            masking = services["all off"].masking
            assert masking is not None
            masking.schema.index_reach = IndexReach(always=True)  # every masked call pinned (before)
        configs = [c for c in CONFIGS if c in services]
        try:
            print(f"\n{engine}: median / p90 per call over {calls} calls, ratio of medians to no masks")
            extra = " all off | ratio | all off / unpinned |" if "all off" in services else ""
            print("| query | no masks | pinned | ratio | unpinned | ratio | pinned / unpinned |" + extra)
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + " ---: |" * (3 if extra else 0))
            for name, sql in QUERIES.items():
                times: dict[str, list[float]] = {c: [] for c in configs}
                refused: set[str] = set()
                if show_sql:
                    for config in configs:
                        _call(services[config], sql, f"{name} [{config}]")
                for rep in range(calls + 3):
                    for i in range(len(configs)):  # rotate who goes first, so load drifts spread evenly
                        config = configs[(rep + i) % len(configs)]
                        ms = _call(services[config], sql)
                        if ms is None:
                            refused.add(config)
                        elif rep >= 3:
                            times[config].append(ms)
                print(_row(name, times, refused))
        finally:
            for service in services.values():
                service.engine.close()


def _show(config: str) -> Callable[..., None]:
    def note(**fields: object) -> None:
        if "sql" in fields:
            print(f"  {config}: {fields['sql']}")

    return note


def _row(name: str, times: dict[str, list[float]], refused: set[str]) -> str:
    def cell(config: str) -> str:
        if config in refused:
            return "refused"
        ts = sorted(times[config])
        return f"{statistics.median(ts):.2f} / {ts[int(len(ts) * 0.9)]:.2f} ms"

    def ratio(config: str, base: str = "no masks") -> str:
        if config in refused or base in refused:
            return "-"
        return f"{statistics.median(times[config]) / statistics.median(times[base]):.1f}x"

    row = f"| {name} | {cell('no masks')} | {cell('pinned')} | {ratio('pinned')} | " + (
        f"{cell('unpinned')} | {ratio('unpinned')} | {ratio('pinned', 'unpinned')} |"
    )
    if "all off" in times:
        row += f" {cell('all off')} | {ratio('all off')} | {ratio('all off', 'unpinned')} |"
    return row


@contextmanager
def _sqlite() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory() as folder:
        dsns = {}
        for which in ("pins", "free"):
            path = Path(folder) / f"pinbench_{which}.db"
            with closing(sqlite3.connect(path)) as conn:
                conn.create_function("md5", 1, lambda v: secrets.token_hex(8))
                conn.executescript(
                    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, email TEXT);"
                    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount INTEGER);"
                    f"WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {CUSTOMERS})"
                    f" INSERT INTO customers SELECT {_CUSTOMER.replace('::text', '')} FROM s;"
                    f"WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {ORDERS})"
                    f" INSERT INTO orders SELECT {_ORDER} FROM s;"
                    "CREATE INDEX pinbench_name ON customers (name);"
                    "CREATE INDEX pinbench_cust ON orders (customer_id);"
                    + ("CREATE INDEX pinbench_email ON customers (email);" if which == "pins" else "")
                )
                conn.commit()
            dsns[which] = f"sqlite:///{path}"
        yield dsns


@contextmanager
def _postgresql() -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    reader = f"pinbench_{tag}_r"
    dbs = {which: f"pinbench_{tag}_{which}" for which in ("pins", "free")}
    with pg_admin(PG_URL) as c:
        c.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'pw' CONNECTION LIMIT {READER_CONNECTIONS}")
    try:
        dsns = {}
        for which, db in dbs.items():
            with pg_admin(PG_URL) as c:
                c.execute(f"CREATE DATABASE {db}")
            url = make_url(PG_URL).set(database=db)
            with pg_admin(url.render_as_string(hide_password=False)) as c:
                c.execute(
                    "CREATE TABLE customers (id int PRIMARY KEY, name text, city text, email text);"
                    "CREATE TABLE orders (id int PRIMARY KEY, customer_id int, amount int);"
                    f"INSERT INTO customers SELECT {_CUSTOMER} FROM generate_series(1, {CUSTOMERS}) n;"
                    f"INSERT INTO orders SELECT {_ORDER} FROM generate_series(1, {ORDERS}) n;"
                    "CREATE INDEX pinbench_name ON customers (name);"
                    "CREATE INDEX pinbench_cust ON orders (customer_id);"
                    + ("CREATE INDEX pinbench_email ON customers (email);" if which == "pins" else "")
                    + f"ANALYZE customers; ANALYZE orders; GRANT USAGE ON SCHEMA public TO {reader};"
                    f"GRANT SELECT (id, name, city) ON customers TO {reader};"
                    f"GRANT SELECT ON orders TO {reader};"
                )
            dsns[which] = url.set(username=reader, password="pw").render_as_string(hide_password=False)
        yield dsns
    finally:
        with pg_admin(PG_URL) as c:
            for db in dbs.values():
                c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


@contextmanager
def _mariadb() -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    reader = f"pinbench_{tag}_r"
    dbs = {which: f"pinbench_{tag}_{which}" for which in ("pins", "free")}
    admin = mysql_admin(MY_URL)
    try:
        with admin.cursor() as c:
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{reader}'@'%' IDENTIFIED BY 'pw' WITH {limit}")
            dsns = {}
            for which, db in dbs.items():
                email_index = ", KEY pinbench_email (email)" if which == "pins" else ""
                c.execute(f"CREATE DATABASE {db}")
                c.execute(
                    f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(16), city VARCHAR(16),"
                    f" email VARCHAR(32), KEY pinbench_name (name){email_index})"
                )
                c.execute(
                    f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, customer_id INT, amount INT,"
                    " KEY pinbench_cust (customer_id))"
                )
                for table, row, count in (("customers", _MY_CUSTOMER, CUSTOMERS), ("orders", _ORDER, ORDERS)):
                    numbers = f"(SELECT seq AS n FROM {db}.seq_1_to_{count}) s"
                    c.execute(f"INSERT INTO {db}.{table} SELECT {row} FROM {numbers}")
                c.execute(f"ANALYZE TABLE {db}.customers, {db}.orders")
                c.fetchall()
                c.execute(f"GRANT SELECT (id, name, city) ON {db}.customers TO '{reader}'@'%'")
                c.execute(f"GRANT SELECT ON {db}.orders TO '{reader}'@'%'")
                url = make_url(MY_URL).set(database=db, username=reader, password="pw")
                dsns[which] = url.render_as_string(hide_password=False)
            c.execute(
                "SELECT round(sum(data_length + index_length) / 1048576, 1) FROM information_schema.tables"
                f" WHERE table_schema LIKE 'pinbench_{tag}_%'"
            )
            print(f"mariadb fixture: {c.fetchone()[0]} MB in both databases")
        yield dsns
    finally:
        with admin.cursor() as c:
            for db in dbs.values():
                c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"DROP USER IF EXISTS '{reader}'@'%'")
        admin.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--show-sql", action="store_true", help="print the SQL each configuration sends")
    p.add_argument("--only", choices=("sqlite", "postgresql", "mariadb"), default=None)
    a = p.parse_args()
    logging.getLogger("mcpkit").setLevel(logging.ERROR)  # start-up advice on the scratch logins
    started = time.perf_counter()
    for engine, fixture in (("sqlite", _sqlite), ("postgresql", _postgresql), ("mariadb", _mariadb)):
        if a.only in (None, engine):
            with fixture() as dsns:
                _measure(engine, dsns, a.calls, a.show_sql)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
