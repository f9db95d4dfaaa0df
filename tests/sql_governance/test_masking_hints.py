"""Red team rt20mask F3b and F5, on the real servers.

F3b: MariaDB admitted `FORCE INDEX (pin_idx)` (and USE/IGNORE INDEX, STRAIGHT_JOIN) under masks, so
the caller chose which masked column's index the scan followed: every scan-order channel then gave
that column's order (with a pin index, the exact pin order). Index hints are refused over a masked
read now; over tables without masked columns, and without masks, they are answered as before.

F5: with `--max-cost`, the refusal printed the planner's estimate, and PostgreSQL costs a scan from
the table's current page count: `SELECT count(*) FROM notes` said cost 597 for 1500-byte masked
bodies and 46 for 50-byte ones (cost - 25 = pg_relation_size / 8192). The refusal names the ceiling
only now; and since refused-or-answered still tells the estimate (padding the query with
`generate_series(1, K)` and searching K found the page count exactly in 20 calls), `--max-cost` with
`--mask` is refused at start-up unless `--allow cost-under-masks` accepts that.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import Refused
from mcpkit.sql.masking.taint import MaskRefused
from mcpkit.sql.service import SqlService
from tests.helpers import run_mcpkit
from tests.sql.sql_support import mysql_scratch, pg_scratch
from tests.sql_governance.support import serve_masked

HINTED = (
    "SELECT c.id FROM customers c FORCE INDEX (pin_idx)",
    "SELECT id, name FROM customers USE INDEX (email_uq)",
    "SELECT id FROM customers IGNORE INDEX (PRIMARY)",
    "SELECT id FROM customers FORCE INDEX FOR ORDER BY (pin_idx) ORDER BY id",
    "SELECT id FROM customers USE INDEX FOR GROUP BY (pin_idx) GROUP BY id",
    "SELECT id FROM plain WHERE id IN (SELECT id FROM customers FORCE INDEX (pin_idx))",
    "SELECT c.id FROM customers c JOIN plain p FORCE INDEX (v_idx) ON p.id = c.id",
    "SELECT STRAIGHT_JOIN c.id FROM plain p, customers c WHERE p.id = c.id",
    "SELECT c.id FROM plain p STRAIGHT_JOIN customers c ON p.id = c.id",
    "SELECT /*+ INDEX(c pin_idx) */ c.id FROM customers c",
)


def _service(url: str, masks: Path | None, **kw: object) -> SqlService:
    """What `serve --mask` does at start-up (no masks: a plain service)."""
    if masks is None:
        return SqlService(SqlEngine(url), max_rows=10, timeout_s=10.0, **kw)  # type: ignore[arg-type]
    return serve_masked(url, masks, **kw)


@pytest.mark.mysql
def test_mariadb_index_hints_are_refused_under_masks(mysql_url: str, tmp_path: Path) -> None:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - customers.email\n  - customers.pin\n")
    with mysql_scratch(mysql_url, "maskhints") as my:
        with my.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {my.db}.customers (id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(40),"
                " pin VARCHAR(8), UNIQUE KEY email_uq (email), KEY pin_idx (pin, id)) ENGINE=InnoDB"
            )
            c.execute(
                f"INSERT INTO {my.db}.customers VALUES (1, 'ann', 'f@x', '4'), (2, 'bob', 'a@x', '3'),"
                " (3, 'cat', 'e@x', '6'), (4, 'dan', 'b@x', '1'), (5, 'eve', 'd@x', '2'),"
                " (6, 'fay', 'c@x', '5')"
            )
            c.execute(f"CREATE TABLE {my.db}.plain (id INT PRIMARY KEY, v INT, KEY v_idx (v)) ENGINE=InnoDB")
            c.execute(f"INSERT INTO {my.db}.plain VALUES (1, 6), (2, 5), (3, 4), (4, 3), (5, 2), (6, 1)")
            c.execute(f"GRANT SELECT (id, name) ON {my.db}.customers TO '{my.reader}'@'%'")
            c.execute(f"GRANT SELECT ON {my.db}.plain TO '{my.reader}'@'%'")
        service = _service(my.reader_url, masks)
        try:
            result, _ = service.query("SELECT c.id FROM customers c", call_id="t")
            assert sorted(r[0] for r in result.rows) == [1, 2, 3, 4, 5, 6]
            for sql in HINTED:
                with pytest.raises(MaskRefused, match="index hints") as info:
                    service.query(sql, call_id="t")
                assert info.value.data == {"reason": "masked_column"}, sql
                assert "pin_idx" not in info.value.message and "customers" not in info.value.message
            # no masked column read: the hint is the caller's to give, as before
            result, _ = service.query("SELECT id FROM plain FORCE INDEX (v_idx) WHERE v > 0", call_id="t")
            assert sorted(r[0] for r in result.rows) == [1, 2, 3, 4, 5, 6]
        finally:
            service.engine.close()  # type: ignore[attr-defined]
        plain = _service(my.reader_url, None)  # no masks: hints answered as before
        try:
            result, _ = plain.query("SELECT c.id FROM customers c FORCE INDEX (pin_idx)", call_id="t")
            assert sorted(r[0] for r in result.rows) == [1, 2, 3, 4, 5, 6]
        finally:
            plain.engine.close()  # type: ignore[attr-defined]


@pytest.mark.postgres
def test_postgres_cost_refusal_carries_no_estimate(pg_url: str, tmp_path: Path) -> None:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - notes.body\n")
    with pg_scratch(pg_url, "maskhints") as pg:
        pg.admin.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
        pg.admin.execute("INSERT INTO notes SELECT g, repeat('x', 1500) FROM generate_series(1, 2000) g")
        pg.admin.execute("VACUUM (FULL, ANALYZE) notes")
        pg.admin.execute(f"GRANT USAGE ON SCHEMA public TO {pg.reader}")
        pg.admin.execute(f"GRANT SELECT (id) ON notes TO {pg.reader}")
        pages = pg.admin.execute("SELECT pg_relation_size('notes') / 8192").fetchone()[0]  # type: ignore[index]
        assert pages > 100  # what the estimate carried: 25 + pages
        for masked in (masks, None):
            service = _service(pg.reader_url, masked, max_cost=1.0)
            try:
                with pytest.raises(Refused) as info:
                    service.query("SELECT count(*) FROM notes", call_id="t")
                assert info.value.data == {"reason": "cost"}
                assert re.findall(r"\d+", info.value.message) == ["1"], info.value.message
            finally:
                service.engine.close()  # type: ignore[attr-defined]
        base = ["sql", "query", "--dsn", pg.reader_url, "--mask", str(masks), "--max-cost", "1"]
        done = run_mcpkit(*base, "SELECT count(*) FROM notes")
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "--allow cost-under-masks" in done.stdout + done.stderr
        done = run_mcpkit(*base, "--allow", "cost-under-masks", "SELECT count(*) FROM notes")
        assert done.returncode == 3, (done.stdout, done.stderr)
        assert "ceiling of 1;" in done.stdout + done.stderr and str(pages + 25) not in done.stdout


def test_sqlite_indexed_by_is_refused_as_a_hint(tmp_path: Path) -> None:
    db, masks = tmp_path / "c.db", tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - customers.email\n")
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("CREATE INDEX customers_email ON customers (email, id)")
        conn.execute("CREATE TABLE plain (id INTEGER PRIMARY KEY, v INT)")
        conn.execute("CREATE INDEX plain_v ON plain (v)")
        conn.executemany("INSERT INTO customers VALUES (?, ?)", [(1, "c@x"), (2, "a@x"), (3, "b@x")])
        conn.executemany("INSERT INTO plain VALUES (?, ?)", [(1, 3), (2, 2), (3, 1)])
    conn.close()
    service = _service(f"sqlite:///{db}", masks)
    try:
        hinted = (
            "SELECT id FROM customers INDEXED BY customers_email",
            "SELECT id FROM customers NOT INDEXED",
        )
        for sql in hinted:
            with pytest.raises(MaskRefused, match="index hints"):
                service.query(sql, call_id="t")
        result, _ = service.query("SELECT id FROM plain INDEXED BY plain_v WHERE v > 0", call_id="t")
        assert sorted(r[0] for r in result.rows) == [1, 2, 3]
    finally:
        service.engine.close()  # type: ignore[attr-defined]
