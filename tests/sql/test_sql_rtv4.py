"""Over-refusals of masked queries (red teams v1 L3, v2 L1, L2) and red team v4 findings, each on the
real engine.

v2 L1: MariaDB's `GROUP_CONCAT(x ORDER BY k LIMIT n)` got a second ORDER BY appended after its LIMIT.
v2 L2: MariaDB refuses ORDER BY beside `GROUP BY ... WITH ROLLUP` (error 1221).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sql.sql_support import masks_file, mysql_customers, mysql_scratch
from tests.sql.sql_support import run_cli as _run


@pytest.mark.mysql
def test_mariadb_group_concat_limit_and_rollup_are_answered(
    mysql_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mysql_scratch(mysql_url, "fixv4_gc") as db:
        mysql_customers(db)
        masks = masks_file(tmp_path, "customers.email")
        ok = {
            "SELECT GROUP_CONCAT(name ORDER BY id LIMIT 3) AS g FROM customers": "| Ann,Bob,Cy |",
            "SELECT GROUP_CONCAT(name ORDER BY id DESC LIMIT 1, 2) AS g FROM customers": "| Dan,Cy |",
            "SELECT GROUP_CONCAT(name LIMIT 2) AS g FROM customers WHERE id < 3": "| Ann,Bob |",
            "SELECT GROUP_CONCAT(id LIMIT 2) AS g FROM customers": "| 1,2 |",  # not the e-mail order 4,1
            "SELECT name, COUNT(*) AS n FROM customers WHERE id < 4 GROUP BY name WITH ROLLUP":
                "| Ann | 1 |\n| Bob | 1 |\n| Cy | 1 |\n| NULL | 3 |",
            "SELECT id, COUNT(*) AS n FROM customers GROUP BY id WITH ROLLUP LIMIT 2": "| 1 | 1 |\n| 2 | 1 |",
            "SELECT (SELECT id FROM customers GROUP BY id WITH ROLLUP LIMIT 1) AS k": "| 1 |",
        }  # fmt: skip
        for sql, wanted in ok.items():
            code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
            assert code == 0 and wanted in out, (sql, out)
        for sql in (
            "SELECT GROUP_CONCAT(name ORDER BY email LIMIT 1) AS g FROM customers",
            "SELECT GROUP_CONCAT(email LIMIT 1) AS g FROM customers",
        ):
            code, out = _run(capsys, "sql", "query", "--dsn", db.reader_url, "--mask", masks, sql)
            assert code == 0 and "<masked>" in out, (sql, out)  # an order inside the LIMIT is still read
