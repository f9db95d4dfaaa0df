"""Review of the red team v1-v3 fixes: legitimate queries they refused, failures they renamed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path = tmp_path_factory.mktemp("review") / "shop.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, total REAL);"
        "CREATE VIRTUAL TABLE docs USING fts5(title, body);"
        "INSERT INTO customer VALUES (1, 'ann'), (2, 'bob');"
        "INSERT INTO orders VALUES (10, 1, 5.0), (11, 2, 7.5), (12, 1, 1.0);"
        "INSERT INTO docs VALUES ('t', 'quick fox');"
    )
    conn.commit()
    conn.close()
    service = SqlService(SqlEngine(f"sqlite:///{path}"), timeout_s=5.0)
    yield service
    service.engine.close()


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        (
            "SELECT o.id, c.name FROM orders o JOIN customer c ON o.customer = c.id ORDER BY o.id",
            [[10, "ann"], [11, "bob"], [12, "ann"]],
        ),
        (
            "SELECT count(*) FROM orders WHERE orders.customer IN (SELECT id FROM customer)",
            [[3]],
        ),
        (
            "SELECT x.customer FROM (SELECT orders.customer FROM orders) x"
            " JOIN customer ON x.customer = customer.id WHERE customer.name = 'bob'",
            [[2]],
        ),
        ("SELECT count(*) FROM orders WHERE customer IN (SELECT id FROM customer WHERE name = 'ann')", [[2]]),
    ],
    ids=["join", "in", "derived", "unqualified in"],
)
def test_a_foreign_key_named_as_its_table_is_no_full_text_query(
    shop: SqlService, sql: str, rows: list[list[object]]
) -> None:
    assert shop.query(sql, call_id="review-fts")[0].rows == rows


def test_a_failed_pinned_catalog_read_in_a_call_raises_its_own_error(pg_url: str) -> None:
    import psycopg

    from mcpkit.sql.profiles.postgres.catalog_path import pinned_fetch

    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path = public")
        conn.execute("BEGIN READ ONLY")  # a call's transaction: BEGIN sent in autocommit mode
        conn.execute("SET LOCAL statement_timeout = 50")
        with pytest.raises(psycopg.Error) as info:
            pinned_fetch(conn, "SELECT pg_catalog.pg_sleep(1)")
        assert info.value.sqlstate == "57014"  # the timeout, not 25P02 from restoring the path after it
        conn.execute("ROLLBACK")
        with pytest.raises(psycopg.Error) as info:  # outside a transaction: restored after the failure
            pinned_fetch(conn, "SELECT 1 / 0")
        assert info.value.sqlstate == "22012"
        assert conn.execute("SHOW search_path").fetchone() == ("public",)


@pytest.mark.postgres
def test_an_anti_join_inside_an_in_subquery_is_answered(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
    from tests.sql.sql_support import run_cli as _run

    with pg_scratch(pg_url, "review_anti") as db:
        pg_customers(db)
        masks = masks_file(tmp_path, "customers.email")
        sql = (
            "SELECT count(*) AS n FROM customers WHERE id IN (SELECT o.id FROM customers o"
            " LEFT JOIN customers b ON b.id > o.id WHERE b.id IS NULL)"
        )
        code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
        assert code == 0 and "| 1 |" in out, out  # before: refused, the IN read as a per-row WHERE


def test_a_compound_of_many_calls_keeps_its_collated_order(shop: SqlService) -> None:
    calls = ", ".join(["length(name)"] * 9)  # 18 calls: interruptible_calls rewrites the query
    sql = (
        f"SELECT name, {calls} FROM customer UNION ALL SELECT upper(name), {calls} FROM customer"
        " ORDER BY name COLLATE NOCASE DESC"
    )
    rows = shop.query(sql, call_id="review-collate")[0].rows
    assert [r[0].lower() for r in rows] == ["bob", "bob", "ann", "ann"]  # before: a failed call
