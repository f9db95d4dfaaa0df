"""Red team rt20mask F1 and F3: where the scan stops, and generators that number the rows.

The setup of the red team, reduced: `customers(id PK, name, email, pin, score)` with the e-mails
in another order than the ids, a reader holding column privileges on the visible ones; the scan
follows the masked e-mail (PostgreSQL: CLUSTER on a unique e-mail index; MariaDB: a covering index
`(email, id)`; SQLite: rows written in e-mail order).

F1: `SELECT 1 FROM customers WHERE <error on row a, true on row b> LIMIT 1` was pinned by
`ORDER BY 1`, a constant the engine drops, so the LIMIT stopped at the first row passing the WHERE:
an error meant a was scanned before b, and a comparison sort read the masked ranking in n log n
calls. Now the pair and its swap get the same answer (or error), or the query is refused.

F3: unseeded MariaDB RAND() (mysys my_rnd) and PostgreSQL random() (xoroshiro128**) give away
their state, so the values of one call chain into the scan order: refused over a masked read like
a seeded RAND(n); SQLite's random() (ChaCha20) and gen_random_uuid() are answered.
"""

from __future__ import annotations

import secrets as tokens
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.masking import MaskPolicy
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import mysql_admin, pg_admin
from tests.sql_governance.support import served_with_views

POLICY = MaskPolicy.of(["customers.email", "customers.pin"])
ROWS = (
    (1, "ann", "zed@x.com", "1111", 10),
    (2, "bob", "amy@x.com", "2222", 20),
    (3, "cat", "mia@x.com", "3333", 30),
    (4, "dan", "bea@x.com", "4444", 40),
    (5, "eve", "kim@x.com", "5555", 50),
    (6, "fay", "cal@x.com", "6666", 60),
)
BY_EMAIL = sorted(ROWS, key=lambda r: r[2])
ORDERS = tuple((i, i, i + 4) for i in range(1, 7))
CUSTOMERS = (
    "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL, email VARCHAR(100) NOT NULL,"
    " pin VARCHAR(10), score INT{extra})"
)
ORDERS_DDL = "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, amount INT)"

# The red team's oracle: an error on row `a`, true on row `b`, false elsewhere.
_ERR = "CASE WHEN {c}id = {a} THEN 1/({c}id - {c}id) WHEN {c}id = {b} THEN 1 ELSE 0 END = 1"
ORACLES = (
    "SELECT 1 FROM customers WHERE " + _ERR + " LIMIT 1",
    "SELECT 1 AS one FROM customers WHERE " + _ERR + " ORDER BY NULL LIMIT 1",
    "SELECT 'x' AS k, 2 AS n FROM customers WHERE " + _ERR + " LIMIT 1 OFFSET 0",
    "SELECT DISTINCT 1 AS one FROM customers WHERE " + _ERR + " LIMIT 1",
    "SELECT x FROM (SELECT 1 AS x FROM customers WHERE " + _ERR + ") t LIMIT 1",
    "SELECT 1 AS one FROM customers c JOIN orders o ON o.customer_id = c.id WHERE " + _ERR + " LIMIT 1",
    "SELECT (SELECT 1 FROM customers c WHERE " + _ERR + " LIMIT 1) AS x",
    "SELECT o.id FROM orders o WHERE o.id = 1 AND EXISTS (SELECT 1 FROM customers c WHERE c.id > 0)"
    " AND (SELECT 1 FROM customers c WHERE " + _ERR + " LIMIT 1) = 1",
)
PG_ORACLES = ("SELECT 1 AS one FROM customers WHERE " + _ERR + " FETCH FIRST 1 ROWS ONLY",)
PAIRS = ((6, 4), (2, 1), (3, 5), (4, 2))

# Ordinary queries that must still answer, with their answers.
ANSWERED = {
    "SELECT id, name FROM customers ORDER BY name LIMIT 2": [(1, "ann"), (2, "bob")],
    "SELECT name FROM customers LIMIT 3": [("ann",), ("bob",), ("cat",)],
    "SELECT DISTINCT name FROM customers LIMIT 2": [("ann",), ("bob",)],
    "SELECT score, count(*) AS n FROM customers GROUP BY score LIMIT 2": [(10, 1), (20, 1)],
    "SELECT count(*) AS n FROM customers LIMIT 1": [(6,)],
    "SELECT id, email FROM customers WHERE id < 3 LIMIT 5": [(1, "<masked>"), (2, "<masked>")],
    "SELECT c.id, (SELECT o.amount FROM orders o WHERE o.customer_id = c.id LIMIT 1) AS a FROM customers c"
    " WHERE c.id < 3": [(1, 5), (2, 6)],
    "SELECT 1 AS one FROM customers WHERE id = 3 LIMIT 1": [(1,)],
}


@dataclass
class Setup:
    dialect: str
    service: SqlService


@pytest.fixture(scope="module")
def sqlite_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    path = tmp_path_factory.mktemp(f"maskfix3_{tokens.token_hex(4)}") / "crm.db"
    with sqlite3.connect(path) as db:
        db.execute(CUSTOMERS.format(extra=""))
        db.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?)", BY_EMAIL)  # written in e-mail order
        db.execute("CREATE UNIQUE INDEX customers_email ON customers (email)")
        db.execute(ORDERS_DDL)
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)", ORDERS)
    db.close()
    service = served_with_views(f"sqlite:///{Path(path)}", POLICY, 100)
    yield Setup("sqlite", service)
    service.engine.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def pg_setup(pg_url: str) -> Iterator[Setup]:
    tag = tokens.token_hex(4)
    db, reader = f"maskfix3_{tag}", f"maskfix3_{tag}_r"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE ROLE {reader} LOGIN")
        c.execute(f"CREATE DATABASE {db}")
    service = None
    try:
        admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
        with pg_admin(admin) as c:
            c.execute(CUSTOMERS.format(extra=""))
            with c.cursor() as cur:
                cur.executemany("INSERT INTO customers VALUES (%s, %s, %s, %s, %s)", ROWS)
            c.execute(ORDERS_DDL)
            with c.cursor() as cur:
                cur.executemany("INSERT INTO orders VALUES (%s, %s, %s)", ORDERS)
            c.execute("CREATE UNIQUE INDEX customers_email ON customers (email)")
            c.execute("CLUSTER customers USING customers_email")
            c.execute("ANALYZE customers")
            c.execute(f"GRANT SELECT (id, name, score) ON customers TO {reader}")
            c.execute(f"GRANT SELECT ON orders TO {reader}")
        url = make_url(admin).set(username=reader, password=None).render_as_string(False)
        service = served_with_views(url, POLICY, 100)
        yield Setup("postgres", service)
    finally:
        if service is not None:
            service.engine.close()  # type: ignore[attr-defined]
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


@pytest.fixture(scope="module")
def mysql_setup(mysql_url: str) -> Iterator[Setup]:
    tag = tokens.token_hex(4)
    db, user = f"maskfix3_{tag}", f"maskfix3_{tag}_r"
    admin = mysql_admin(mysql_url)
    service = None
    try:
        with admin.cursor() as c:
            c.execute(f"CREATE USER '{user}'@'%'")
            c.execute(f"CREATE DATABASE {db}")
            c.execute(f"USE {db}")
            c.execute(CUSTOMERS.format(extra=", KEY cov (email, id)") + " ENGINE=InnoDB")
            c.executemany("INSERT INTO customers VALUES (%s, %s, %s, %s, %s)", ROWS)
            c.execute(ORDERS_DDL)
            c.executemany("INSERT INTO orders VALUES (%s, %s, %s)", ORDERS)
            c.execute("ANALYZE TABLE customers")
            c.fetchall()
            c.execute(f"GRANT SELECT (id, name, score) ON {db}.customers TO '{user}'@'%'")
            c.execute(f"GRANT SELECT ON {db}.orders TO '{user}'@'%'")
        url = make_url(mysql_url).set(username=user, password=None, database=db).render_as_string(False)
        service = served_with_views(url, POLICY, 100)
        yield Setup("mysql", service)
    finally:
        if service is not None:
            service.engine.close()  # type: ignore[attr-defined]
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


@pytest.fixture(
    params=[
        pytest.param("sqlite_setup", id="sqlite"),
        pytest.param("pg_setup", id="postgres", marks=pytest.mark.postgres),
        pytest.param("mysql_setup", id="mysql", marks=pytest.mark.mysql),
    ]
)
def setup(request: pytest.FixtureRequest) -> Setup:
    found: Setup = request.getfixturevalue(request.param)
    return found


def _outcome(service: SqlService, sql: str) -> object:
    try:
        result, _ = service.query(sql, call_id="maskfix3", max_rows=100)
    except Refused as exc:
        return ("refused", exc.code, exc.message)
    except QueryFailed as exc:
        return ("failed", exc.kind)
    return [tuple(r) for r in result.rows]


def test_the_scan_follows_the_masked_emails(setup: Setup) -> None:
    # The leak is real on this setup: without masking's analysis the ids come in e-mail order.
    raw = SqlService(setup.service.engine, max_rows=100, timeout_s=20.0)
    sql = "SELECT id, score FROM customers" if setup.dialect == "sqlite" else "SELECT id FROM customers"
    rows = _outcome(raw, sql)
    assert isinstance(rows, list) and [r[0] for r in rows] == [r[0] for r in BY_EMAIL]


@pytest.mark.parametrize("oracle", range(len(ORACLES) + len(PG_ORACLES)))
def test_a_limit_does_not_stop_where_the_masked_order_says(setup: Setup, oracle: int) -> None:
    if oracle >= len(ORACLES) and setup.dialect != "postgres":
        pytest.skip("FETCH FIRST: PostgreSQL")
    template = (*ORACLES, *PG_ORACLES)[oracle]
    prefix = "" if "customers WHERE" in template else "c."
    for a, b in PAIRS:
        first = _outcome(setup.service, template.format(c=prefix, a=a, b=b))
        swapped = _outcome(setup.service, template.format(c=prefix, a=b, b=a))
        assert first == swapped, (template, a, b, first, swapped)


@pytest.mark.parametrize("sql", ["SELECT DISTINCT 1 AS one FROM customers LIMIT 1", ORACLES[4]])
def test_a_limit_over_rows_nothing_visible_tells_apart_is_refused(setup: Setup, sql: str) -> None:
    with pytest.raises(Refused) as info:
        setup.service.query(sql.format(c="", a=6, b=4), call_id="maskfix3", max_rows=10)
    assert info.value.code == "REFUSED"
    assert "need rows told apart by visible columns" in info.value.message


@pytest.mark.parametrize("sql", list(ANSWERED))
def test_ordinary_limits_still_answer(setup: Setup, sql: str) -> None:
    assert _outcome(setup.service, sql) == ANSWERED[sql]


GENERATORS = {
    "mysql": (
        "SELECT c.id, (SELECT RAND() + c.id * 0) AS r FROM customers c",
        "SELECT id, RAND() AS r FROM customers",
        "SELECT name FROM customers ORDER BY RAND() LIMIT 2",
    ),
    "postgres": (
        "SELECT c.id, (SELECT random() + c.id * 0) AS r FROM customers c",
        "SELECT id, pg_catalog.random() AS r FROM customers",
        'SELECT id, "random"() AS r FROM customers',
    ),
}
GENERATORS_ANSWERED = {
    "mysql": ("SELECT id, RAND() < 2 AS r FROM orders",),
    "postgres": (
        "SELECT id, random() < 2 AS r FROM orders",
        "SELECT id, length(gen_random_uuid()::text) AS n FROM customers",
    ),
    "sqlite": (
        "SELECT id, typeof(random()) AS r FROM customers",
        "SELECT id, length(randomblob(4)) AS n FROM customers",
    ),
}


def test_guessable_generators_are_refused_over_a_masked_read(setup: Setup) -> None:
    for sql in GENERATORS.get(setup.dialect, ()):
        with pytest.raises(Refused) as info:
            setup.service.query(sql, call_id="maskfix3", max_rows=10)
        assert info.value.code == "REFUSED", sql
        assert "RAND and random()" in info.value.message, sql


def test_cryptographic_generators_and_unmasked_reads_still_answer(setup: Setup) -> None:
    for sql in GENERATORS_ANSWERED[setup.dialect]:
        rows = _outcome(setup.service, sql)
        assert isinstance(rows, list) and len(rows) == 6, (sql, rows)


@pytest.mark.mysql
def test_index_hints_are_refused_over_a_masked_read(mysql_setup: Setup) -> None:
    # rt20mask F3b: FORCE INDEX chose which masked column's order the scan (and so F1, F3) follows.
    for hint in (
        "FORCE INDEX (cov)",
        "USE INDEX (cov)",
        "IGNORE INDEX (PRIMARY)",
        "FORCE INDEX FOR ORDER BY (cov)",
    ):
        with pytest.raises(Refused) as info:
            mysql_setup.service.query(
                f"SELECT c.id FROM customers c {hint} WHERE c.id > 2", call_id="maskfix3", max_rows=10
            )
        assert "index hints" in info.value.message, hint
    raw = SqlService(mysql_setup.service.engine, max_rows=100, timeout_s=20.0)
    assert _outcome(raw, "SELECT c.id FROM customers c FORCE INDEX (cov)") == [(r[0],) for r in BY_EMAIL]
    assert _outcome(mysql_setup.service, "SELECT id FROM orders FORCE INDEX (PRIMARY) WHERE id < 3") == [
        (1,),
        (2,),
    ]
