"""Red team rtI L2: past 16 comparisons, `interruptible_calls` wrapped a key join's ON terms as
`CASE WHEN 1 THEN c18.id = c17.id END`, which SQLite cannot seek with: an 18-table key join took 1 s,
30 tables timed out (28 ms in sqlite3), and 95 correlated `count(*)` subqueries lost their index.
Such a condition now stays as written, followed by a jump that keeps its truth value
(`c18.id = c17.id AND CASE WHEN 1 THEN 1 ELSE c18.id = c17.id END`): SQLite seeks with it, and where
it compares instead (a declared NOCASE column over 24 MB), the interrupt still lands between runs of
16 comparisons.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission.admit import admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.service import SqlService

_JOIN = "SELECT count(*) AS n FROM customers c0 " + " ".join(
    f"JOIN customers c{i} ON c{i}.id = c{i - 1}.id" for i in range(1, 30)
)
_SUBQUERIES = (
    "SELECT "
    + ", ".join(
        f"(SELECT count(*) FROM orders o WHERE o.customer_id = c.id AND o.total > {i}) AS s{i}"
        for i in range(40)
    )
    + " FROM customers c WHERE c.id < 20"
)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = tmp_path_factory.mktemp("rti_keys") / "shop.db"
    conn = sqlite3.connect(found)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO customers VALUES (?, ?)", [(i, f"n{i}") for i in range(3000)])
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total INTEGER)")
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, i % 3000, i % 97) for i in range(8000)])
    conn.execute("CREATE INDEX orders_cust ON orders (customer_id)")
    conn.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, u TEXT COLLATE NOCASE)")
    conn.execute("INSERT INTO big VALUES (1, ?), (2, 'ab')", ("x" * 24_000_000,))
    conn.commit()
    conn.close()
    return found


@pytest.fixture(scope="module")
def service(path: Path) -> Iterator[SqlService]:
    # in process: the interrupt (not a worker's kill) is what ends a call here
    served = SqlService(SqlEngine(f"sqlite:///{path}", isolate=False), timeout_s=2.0)
    yield served
    served.engine.close()


def _plan(path: Path, sql: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
    finally:
        conn.close()


def test_a_30_table_key_join_seeks_every_table(path: Path, service: SqlService) -> None:
    sent = admit(_JOIN, "sqlite").sql
    plan = _plan(path, sent)
    assert sum("SEARCH" in step and "INTEGER PRIMARY KEY" in step for step in plan) == 29, plan
    assert service.query(_JOIN, call_id="rti-l2")[0].rows == [[3000]]


def test_correlated_subqueries_keep_their_index(path: Path, service: SqlService) -> None:
    sent = admit(_SUBQUERIES, "sqlite").sql
    plan = _plan(path, sent)
    assert sum("USING INDEX orders_cust" in step for step in plan) == 40, plan
    assert len(service.query(_SUBQUERIES, call_id="rti-l2s")[0].rows) == 20


def test_comparisons_that_do_not_seek_still_stop_at_the_interrupt(service: SqlService) -> None:
    """150 `u = u` over 24 MB under NOCASE, 3-6 s back to back: still ended a second past 2 s (half
    the terms of the first version: less analysis, which a loaded host could push past its budget)."""
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        service.query(
            "SELECT id FROM big WHERE id = 1 AND " + " AND ".join(["u = u"] * 150), call_id="rti-l2b"
        )
    assert time.monotonic() - started < 2.0 + 4.0


def test_the_answer_is_the_query_s(path: Path) -> None:
    sql = "SELECT c.id FROM customers c JOIN orders o ON o.customer_id = c.id WHERE " + " AND ".join(
        f"c.id >= {i}" for i in range(20)
    )
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(admit(sql, "sqlite").sql).fetchall() == conn.execute(sql).fetchall() != []
    finally:
        conn.close()
