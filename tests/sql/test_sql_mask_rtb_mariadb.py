"""Red team rtB (MariaDB 10.11, column masking), each on the real server.

F1: an IN / ANY / ALL subquery of plain comparisons was left as written on MariaDB; a comparison
across types there (`c.id = p.s`, `p.s` the outer row's text `'a'`) warns on the rows it reaches, a
warning fails the call, and FirstMatch stops at the first match: answered or failed told whether
row b was scanned (in masked e-mail order) before row a.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sql.sql_support import MysqlScratch, masks_file, mysql_customers, mysql_scratch
from tests.sql.sql_support import run_cli as _run

# Ids 4 and 1 are the first two in e-mail order (`CUSTOMERS_ROWS`): each query is asked for (4, 1)
# and (1, 4); before, one of the two failed on the data and the other answered.
F1 = {
    "correlated text": "SELECT p.v FROM probe p WHERE p.s = 'a' AND 1 IN (SELECT 1 FROM customers c"
    " WHERE c.id = {a} OR (c.id = {b} AND c.id = p.s) OR p.v = 99)",
    "truth value": "SELECT p.v FROM probe p WHERE p.s = 'a' AND 1 IN (SELECT 1 FROM customers c"
    " WHERE c.id = {a} OR (c.id = {b} AND p.s) OR p.v = 99)",
    "is true": "SELECT p.v FROM probe p WHERE p.s = 'a' AND 1 IN (SELECT 1 FROM customers c"
    " WHERE c.id = {a} OR (c.id = {b} AND p.s IS TRUE) OR p.v = 99)",
    "in list": "SELECT p.v FROM probe p WHERE p.s = 'a' AND 1 IN (SELECT 1 FROM customers c"
    " WHERE c.id = {a} OR (c.id = {b} AND c.id IN (p.s, 0)) OR p.v = 99)",
    "any": "SELECT p.v FROM probe p WHERE p.s = 'a' AND 1 = ANY (SELECT 1 FROM customers c"
    " WHERE c.id = {a} OR (c.id = {b} AND c.id = p.s) OR p.v = 99)",
    "select list": "SELECT p.v, 1 IN (SELECT 1 FROM customers c WHERE c.id = {a}"
    " OR (c.id = {b} AND c.id = p.s) OR p.v = 99) AS x FROM probe p WHERE p.s = 'a'",
    "literal": "SELECT p.v FROM probe p WHERE 1 IN (SELECT 1 FROM customers c"
    " WHERE c.id = {a} OR (c.id = {b} AND c.name = 0) OR p.v = 99)",
}


def _probe(db: MysqlScratch) -> None:
    with db.admin.cursor() as c:
        c.execute(f"CREATE TABLE {db.db}.probe (v int PRIMARY KEY, s varchar(20))")
        c.execute(f"INSERT INTO {db.db}.probe VALUES (1, 'x'), (4, 'a')")
        c.execute(f"CREATE TABLE {db.db}.orders (id int PRIMARY KEY, customer_id int, amount int)")
        c.execute(f"INSERT INTO {db.db}.orders VALUES (1, 1, 10), (2, 2, 20), (3, 3, 30), (4, 1, 40)")
        c.execute(f"GRANT SELECT ON {db.db}.probe TO '{db.reader}'@'%'")
        c.execute(f"GRANT SELECT ON {db.db}.orders TO '{db.reader}'@'%'")


@pytest.mark.mysql
def test_mariadb_in_subquery_comparing_across_types_is_refused(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mysql_scratch(mysql_url, "rtb_f1") as db:
        mysql_customers(db)
        _probe(db)
        masks = masks_file(tmp_path, "customers.email")
        for name, sql in F1.items():
            for a, b in ((4, 1), (1, 4)):
                code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks,
                                 sql.format(a=a, b=b))  # fmt: skip
                assert code != 0 and "a comparison across types" in out, (name, a, b, out)
        ok = {  # comparisons of one type stay as written (a semi-join; correlated, UNION branches)
            "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders UNION SELECT 5)"
            " ORDER BY id": "| Ann |\n| Bob |\n| Cy |\n| Eve |",
            "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE amount > 15)"
            " ORDER BY id": "| Ann |\n| Bob |\n| Cy |",
            "SELECT name FROM customers c WHERE id = ANY (SELECT customer_id FROM orders o"
            " WHERE o.amount > 15 AND o.id = c.id) ORDER BY id": "| Bob |\n| Cy |",
            "SELECT v FROM probe p WHERE s IN (SELECT name FROM customers WHERE id < 4)": "0 rows",
        }
        for sql, wanted in ok.items():
            code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
            assert code == 0 and wanted in out, (sql, out)


# F3: a full scan that fails on row a with one error and on row b with another told, by the failure's
# sentence, which of the two the masked index reached first.
F3 = {
    "overflow": "SELECT COUNT(*) AS n FROM customers WHERE CASE"
    " WHEN id = {a} THEN 9223372036854775807 + id > 0"
    " WHEN id = {b} THEN (SELECT p.v FROM probe p WHERE p.v > id - 100) > 0 ELSE 0 END",
    "double": "SELECT COUNT(*) AS n FROM customers WHERE CASE WHEN id = {a} THEN EXP(1000 + id) > 0"
    " WHEN id = {b} THEN (SELECT p.v FROM probe p WHERE p.v > id - 100) > 0 ELSE 0 END",
}


@pytest.mark.mysql
def test_mariadb_failures_over_a_masked_read_read_alike(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mysql_scratch(mysql_url, "rtb_f3") as db:
        mysql_customers(db)
        _probe(db)
        masks = masks_file(tmp_path, "customers.email")
        for name, sql in F3.items():
            answers = []
            for a, b in ((4, 1), (1, 4)):
                code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks,
                                 sql.format(a=a, b=b))  # fmt: skip
                assert code != 0, (name, out)
                answers.append(out.strip().splitlines()[-1])
            assert answers[0] == answers[1], (name, answers)  # before: "could not run" / "failed on the data"
            assert "not told apart" in answers[0], answers
        # without masks the classes stay told apart
        sql = "SELECT 9223372036854775807 + id AS n FROM customers"
        code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, sql)
        assert code != 0 and "could not run the query" in out, out


# F2: MariaDB adds doubles in the order it scans; +1e30 on row x, -1e30 on row r and 2^id elsewhere
# left in the sum exactly the rows scanned after both (the masked e-mail ranking, 4 calls a row).
F2_VALUE = "CASE WHEN id = 1 THEN 1e30 WHEN id = 4 THEN -1e30 ELSE POW(2, id) END"
F2_REFUSED = [
    f"SELECT SUM({F2_VALUE}) AS s FROM customers",
    f"SELECT AVG({F2_VALUE}) AS s FROM customers",
    "SELECT SUM(POW(2, id)) AS s FROM customers",
    "SELECT SUM(CASE WHEN id = 4 THEN 1e30 ELSE id END) AS s FROM customers",  # 1e30 is a double
    "SELECT STD(id) AS s FROM customers",  # computed in doubles whatever the argument
    "SELECT name, SUM(POW(2, id)) AS s FROM customers GROUP BY name",
]
F2_WINDOWS = [
    f"SELECT id, SUM({F2_VALUE}) OVER () AS s FROM customers",
    f"SELECT id, AVG({F2_VALUE}) OVER (PARTITION BY id > 2) AS s FROM customers",
]
F2_OK = {
    "SELECT SUM(id) AS s, AVG(id) AS a, SUM(IF(id > 2, 1, 0)) AS i, SUM(LENGTH(name)) AS l,"
    " SUM(id > 2) AS b, SUM(CAST(POW(2, id) AS DECIMAL(30, 10))) AS c FROM customers": "| 15 | 3",
}


@pytest.mark.mysql
def test_mariadb_floating_sums_do_not_follow_the_scan(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mysql_scratch(mysql_url, "rtb_f2") as db:
        mysql_customers(db)
        masks = masks_file(tmp_path, "customers.email")

        def ask(sql: str) -> tuple[int, str]:
            return _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)

        for sql in F2_REFUSED:
            code, out = ask(sql)
            assert code != 0 and "adds in the storage order" in out, (sql, out)  # before: answered
        for sql, wanted in F2_OK.items():
            code, out = ask(sql)
            assert code == 0 and wanted in out, (sql, out)
        by_email = [ask(sql)[1].splitlines()[2:] for sql in F2_WINDOWS]
        with db.admin.cursor() as c:
            c.execute(f"ALTER TABLE {db.db}.customers DROP INDEX email_idx")
        by_key = [ask(sql)[1].splitlines()[2:] for sql in F2_WINDOWS]
        assert by_email == by_key  # before: the sums followed the scan (e-mail index, then primary key)
        assert all("| 1 |" in "\n".join(rows) for rows in by_key), by_key


# F4: MariaDB keeps the first scanned of -0e0 and 0e0 (equal, printed alike), which ATAN2 tells apart.
F4_MAX = "SELECT ATAN2(MAX(IF(id = {a}, -1e0 * 0e0, IF(id = {b}, 0e0, -1e0))), -1) AS s FROM customers"
F4_GROUPED = [
    "SELECT ATAN2(k, -1) AS s, COUNT(*) AS n FROM (SELECT IF(id = {a}, -1e0 * 0e0, IF(id = {b}, 0e0, 1e0))"
    " AS k FROM customers) t GROUP BY k",
    "SELECT DISTINCT ATAN2(k, -1) AS s FROM (SELECT k FROM (SELECT IF(id = {a}, -1e0 * 0e0, 0e0) AS k"
    " FROM customers WHERE id IN ({a}, {b})) u GROUP BY k) t",
]


@pytest.mark.mysql
def test_mariadb_signed_zeros_keep_no_scan_order(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mysql_scratch(mysql_url, "rtb_f4") as db:
        mysql_customers(db)
        masks = masks_file(tmp_path, "customers.email")

        def ask(sql: str) -> tuple[int, str]:
            return _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)

        for a, b in ((4, 1), (1, 4)):
            code, out = ask(F4_MAX.format(a=a, b=b))
            assert code != 0 and "MIN and MAX" in out, out  # before: -pi or pi by the scan
        for sql in F4_GROUPED:
            answers = [ask(sql.format(a=a, b=b)) for a, b in ((4, 1), (1, 4))]
            assert all(code == 0 for code, _ in answers), answers
            shown = [out.splitlines()[2:] for _, out in answers]
            assert shown[0] == shown[1], (sql, shown)  # before: the group showed the first scanned zero
        sql = "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY IF(id = 4, -1e0 * 0e0, 0e0)) AS p"
        sql += " FROM customers"
        code, out = ask(sql)
        assert code != 0 and "prints one way" in out, out  # interpolated from the first scanned zero
        code, out = ask("SELECT MAX(id * 2) AS m, MAX(id + 1.5) AS x, MAX(id / 2) AS d FROM customers")
        assert code == 0 and "| 10 | 6.5 | 2.5 |" in out, out


@pytest.mark.mysql
def test_mariadb_a_masked_table_granted_to_public_is_revoked_from_public(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F5: start-up refused a `GRANT SELECT ON db.customers TO PUBLIC` but printed only the login's REVOKE,
    which leaves PUBLIC's grant: the next start was refused again."""
    with mysql_scratch(mysql_url, "rtb_f5") as db:
        mysql_customers(db)
        masks = masks_file(tmp_path, "customers.email")
        with db.admin.cursor() as c:
            c.execute(f"GRANT SELECT ON {db.db}.customers TO PUBLIC")
        try:
            code, out = _run(
                capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, "SELECT 1 AS one"
            )
            assert code != 0 and f"REVOKE SELECT ON `{db.db}`.`customers` FROM PUBLIC" in out, out
            with db.admin.cursor() as c:
                c.execute(f"REVOKE SELECT ON {db.db}.customers FROM PUBLIC")
            code, out = _run(
                capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, "SELECT 1 AS one"
            )
            assert code == 0 and "| 1 |" in out, out
        finally:
            with db.admin.cursor() as c:
                c.execute(
                    "SELECT COUNT(*) FROM mysql.tables_priv WHERE Db = %s AND User = 'PUBLIC'", (db.db,)
                )
                if c.fetchone()[0]:
                    c.execute(f"REVOKE SELECT ON {db.db}.customers FROM PUBLIC")


@pytest.mark.mysql
def test_mariadb_percentiles_over_a_window_are_answered(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """L1: an ORDER BY was appended to `PERCENTILE_CONT(...) WITHIN GROUP (...) OVER (...)`, which MariaDB
    refuses (a syntax error); its value is one of its partition's sorted values, whatever their order."""
    with mysql_scratch(mysql_url, "rtb_l1") as db:
        mysql_customers(db)
        masks = masks_file(tmp_path, "customers.email")
        sql = (
            "SELECT name, PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY id) OVER (PARTITION BY id > 2) AS p,"
            " PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY id) OVER () AS d FROM customers"
        )
        code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
        assert code == 0 and "| Ann | 1.5 | 3 |" in out and "| Eve | 4.0 | 3 |" in out, out
        sql = "SELECT PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY UPPER(name)) OVER () AS d FROM customers"
        code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
        assert code != 0 and "prints one way" in out, out  # the representative of 'a'/'A' stays refused
