"""Early stops and alias scoping over masked reads (red teams rt35a F8, rt35b F3/F3b).

F8: `EXISTS (SELECT 1 FROM customers WHERE CASE WHEN id = a THEN true WHEN id = b THEN 1 / (id - b)
= 1 ELSE false END)` stopped at the first match in scan order: true iff a was scanned before b
(an index / CLUSTER on the masked e-mail), else an error; a comparison sort of the masked column.
Each query here is fingerprinted under two scan orders (clustered on the e-mail, then on the key):
the answers (or refusals) must be the same.

F3: MariaDB reads a name inside an ORDER BY expression (or GROUP BY) as the FROM column first, the
analysis read it as the output alias: `SELECT DISTINCT (id IN (2, 5)) AS id ... ORDER BY - CASE id ...`
passed the DISTINCT check while ordering by the first scanned row's id.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.sql.sql_support import (
    CUSTOMERS_ROWS,
    MysqlScratch,
    masks_file,
    mysql_customers,
    mysql_scratch,
    pg_customers,
    pg_scratch,
    serving_masked,
)
from tests.sql.sql_support import run_cli as _run

# CUSTOMERS_ROWS: e-mail order of ids 4, 1, 5, 2, 3; key order 1..5. Row 1 matches, row 4 fails.
PG_FAIL = "1 / (id - 4) = 1"
MY_FAIL = "1 / (id - 4) = 1"  # MariaDB: warning 1365, made an error per call
CASE = "CASE WHEN id = 1 THEN true WHEN id = 4 THEN {fail} ELSE false END"


def _queries(fail: str, dialect: str) -> list[str]:
    case = CASE.format(fail=fail)
    out = [
        f"SELECT EXISTS (SELECT 1 FROM customers WHERE {case}) AS e",
        f"SELECT NOT EXISTS (SELECT 1 FROM customers WHERE {case}) AS e",
        # nested: each EXISTS is read from its own ordered derived table
        "SELECT EXISTS (SELECT 1 FROM customers a WHERE a.id + 0 = 1 AND EXISTS (SELECT 1 FROM customers"
        f" WHERE {case})) AS e",
        "SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM customers d WHERE d.id + 0 <> c.id AND"
        " CASE WHEN d.id = 1 THEN true WHEN d.id = 4 THEN 1 / (d.id - 4) = 1 ELSE false END) ORDER BY id",
        f"SELECT EXISTS (SELECT 1 FROM customers WHERE {case} LIMIT 1) AS e",
        f"SELECT 1 IN (SELECT id + 0 FROM customers WHERE {case}) AS e",
        f"SELECT 1 = ANY (SELECT id + 0 FROM customers WHERE {case}) AS e",
    ]
    if dialect == "postgres":  # a subplan per outer row (a correlated ANY is not hashed)
        # plain as written, but the CTE's column computes per row
        out.append(
            "WITH d AS (SELECT id, CASE WHEN id = 4 THEN 1 / (id - 4) ELSE id END AS x FROM customers)"
            " SELECT EXISTS (SELECT 1 FROM d WHERE x = 1) AS e"
        )
        out.append(
            "SELECT id FROM customers c WHERE 1 = ANY (SELECT d.id FROM customers d WHERE d.name <> c.name"
            " AND CASE WHEN d.id = 1 THEN true WHEN d.id = 4 THEN 1 / (d.id - 4) = 1 ELSE false END)"
        )
    return out


async def _fingerprint(dsn: str, masks: str, sqls: list[str]) -> list[str]:
    """Each answer's text and error code, through one served session."""
    out = []
    async with serving_masked(dsn, Path(masks)) as ask:
        for sql in sqls:
            result = await ask(sql)
            code = (result.meta or {}).get("mcpkit/error", {}).get("code")
            text = " ".join(getattr(c, "text", "") for c in result.content)
            out.append(f"{code}: {re.sub(r'[0-9.]+ ms', '', text)}")
    return out


@pytest.mark.postgres
@pytest.mark.anyio
async def test_postgres_early_stops_answer_alike_under_two_scan_orders(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "rt35_stops") as db:
        pg_customers(db)  # clustered on the e-mail
        masks = masks_file(tmp_path, "customers.email")
        sqls = _queries(PG_FAIL, "postgres")
        # a scalar subquery's "more than one row" reads as a data failure, not another class
        sqls.append("SELECT (SELECT id FROM customers WHERE id < 3) AS s")
        legit = {  # ordinary queries still answered
            "SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM customers d WHERE d.id = c.id + 1)"
            " ORDER BY id": "| 4 |",
            "SELECT id FROM customers WHERE id IN (SELECT id * 2 FROM customers) ORDER BY id": "| 4 |",
            "SELECT NOT EXISTS (SELECT 1 FROM customers WHERE length(name) > 5) AS e": "| true |",
        }
        sqls += list(legit)
        by_email = await _fingerprint(db.reader_url, masks, sqls)
        db.admin.execute("CLUSTER customers USING customers_pkey; ANALYZE customers")
        by_key = await _fingerprint(db.reader_url, masks, sqls)
        assert by_email == by_key  # before: EXISTS true by key, an error by e-mail
        assert "failed on the data" in by_key[-4], by_key[-4]
        for answer, wanted in zip(by_key[-3:], legit.values(), strict=True):
            assert answer.startswith("None:") and wanted in answer, answer


@pytest.mark.mysql
@pytest.mark.anyio
async def test_mariadb_early_stops_answer_alike_under_two_scan_orders(mysql_url: str, tmp_path: Path) -> None:
    with mysql_scratch(mysql_url, "rt35_stops") as db:
        mysql_customers(db)  # a scan of the covering e-mail index answers the ids in e-mail order
        masks = masks_file(tmp_path, "customers.email")
        sqls = _queries(MY_FAIL, "mysql")
        sqls += list(legit := {
            "SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM customers d WHERE d.id = c.id + 1)"
            " ORDER BY id": "| 4 |",
            "SELECT id FROM customers WHERE id IN (SELECT id FROM customers WHERE name <> 'Ann') ORDER BY id":
                "| 2 |",
        })  # fmt: skip
        sqls.append("SELECT (SELECT id FROM customers WHERE id < 3) AS s")  # error 1242: a data failure
        by_email = await _fingerprint(db.reader_url, masks, sqls)
        with db.admin.cursor() as c:
            c.execute(f"ALTER TABLE {db.db}.customers DROP INDEX email_idx")
        by_key = await _fingerprint(db.reader_url, masks, sqls)
        assert by_email == by_key  # before: EXISTS 1 by key, an error by e-mail
        assert "failed on the data" in by_key[-1], by_key[-1]
        for answer, wanted in zip(by_key[-3:-1], legit.values(), strict=True):
            assert answer.startswith("None:") and wanted in answer, answer


F3 = {
    "distinct": "SELECT DISTINCT (id IN (2, 5)) AS id FROM customers WHERE id + 0 IN (2, 5, 1)"
    " ORDER BY - CASE id WHEN 2 THEN -1 WHEN 5 THEN -3 ELSE -2 END",
    "grouped": "SELECT (id IN (2, 5)) AS id, COUNT(*) AS n FROM customers WHERE id + 0 IN (2, 5, 1)"
    " GROUP BY (id IN (2, 5)) ORDER BY - CASE id WHEN 2 THEN -1 WHEN 5 THEN -3 ELSE -2 END",
    "addendum": "SELECT name AS id, COUNT(*) AS n FROM customers GROUP BY name ORDER BY -id",
}


@pytest.mark.mysql
def test_mariadb_a_name_inside_an_order_by_expression_is_the_column(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db: MysqlScratch
    with mysql_scratch(mysql_url, "rt35_alias") as db:
        mysql_customers(db)
        masks = masks_file(tmp_path, "customers.email")
        for name, sql in F3.items():
            code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
            assert code != 0, (name, out)  # before: answered in the first scanned rows' id order
            assert "may order only by what it selects" in out or "must be grouped or aggregated" in out, out
        ok = {
            "SELECT DISTINCT name AS id FROM customers ORDER BY id LIMIT 1": "| Ann |",
            "SELECT UPPER(name) AS name, COUNT(*) AS n FROM customers GROUP BY UPPER(name) ORDER BY name"
            " LIMIT 1": "| ANN | 1 |",
        }
        for sql, wanted in ok.items():
            code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
            assert code == 0 and wanted in out, (sql, out)


def _sqlite_customers(path: Path, clustered: bool) -> None:
    """`customers` laid out in e-mail order (WITHOUT ROWID keyed on the e-mail) or in id order."""
    layout = "PRIMARY KEY (email, id)) WITHOUT ROWID" if clustered else "PRIMARY KEY (id))"
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE IF EXISTS customers")
        conn.execute(
            "CREATE TABLE customers (id INTEGER NOT NULL UNIQUE, name TEXT NOT NULL, email TEXT NOT NULL,"
            f" {layout}"
        )
        conn.execute(f"INSERT INTO customers VALUES {', '.join(map(str, CUSTOMERS_ROWS))}")
    conn.close()


def test_sqlite_early_stops_answer_alike_under_two_scan_orders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "shop.db"
    masks = masks_file(tmp_path, "customers.email")
    overflow = "abs(-9223372036854775807 - 1) = 1"  # SQLite: "integer overflow" on row 4 only
    # reads name too, so the scan is of the table (in e-mail order), not of the index on id
    case = CASE.format(fail=overflow).replace("THEN true", "THEN name <> ''")
    sqls = [
        f"SELECT EXISTS (SELECT 1 FROM customers WHERE {case}) AS e",
        f"SELECT NOT EXISTS (SELECT 1 FROM customers WHERE {case}) AS e",
        # nested: each EXISTS is read from its own ordered derived table
        "SELECT EXISTS (SELECT 1 FROM customers a WHERE a.id + 0 = 1 AND EXISTS (SELECT 1 FROM customers"
        f" WHERE {case})) AS e",
        "SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM customers d WHERE d.id = c.id + 1 + 0)"
        " ORDER BY id",
    ]
    prints = []
    for clustered in (True, False):
        _sqlite_customers(path, clustered)
        runs = [_run(capsys, "sql", "query", "--dsn", f"sqlite:///{path}", "--mask", masks, s) for s in sqls]
        shown = ("|", "TOOL_ERROR", "REFUSED")  # the answer, not the log lines
        prints.append([(code, [ln for ln in out.splitlines() if ln.startswith(shown)]) for code, out in runs])
    assert prints[0] == prints[1]  # before: an integer overflow in e-mail order, 1 in id order
    assert prints[0][3][0] == 0 and "| 4 |" in prints[0][3][1], prints[0][3]
    assert prints[0][0][0] != 0 or "| 1 |" in prints[0][0][1], prints[0][0]
