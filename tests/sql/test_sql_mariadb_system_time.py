"""MariaDB's system-versioned tables read as the analyst wrote them (grammar.mysql).

sqlglot wrote `FOR SYSTEM_TIME AS OF x` as `FOR TIMESTAMP AS OF x` and `BETWEEN a AND b` /
`FROM a TO b` as a tuple: MariaDB refused each legitimate query with a syntax error.
"""

from __future__ import annotations

import time

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import mysql_scratch

_AT = "(SELECT MIN(changed) FROM marks)"


@pytest.mark.mysql
def test_mariadb_for_system_time_reads_the_table_as_it_was(mysql_url: str) -> None:
    with mysql_scratch(mysql_url, "st") as s, s.admin.cursor() as c:
        c.execute(f"CREATE TABLE {s.db}.prices (id INT PRIMARY KEY, price INT) WITH SYSTEM VERSIONING")
        c.execute(f"CREATE TABLE {s.db}.marks (changed TIMESTAMP(6))")
        c.execute(f"INSERT INTO {s.db}.prices VALUES (1, 10)")
        time.sleep(0.01)
        c.execute(f"INSERT INTO {s.db}.marks VALUES (NOW(6))")
        time.sleep(0.01)
        c.execute(f"UPDATE {s.db}.prices SET price = 20 WHERE id = 1")
        c.execute(f"SELECT changed FROM {s.db}.marks")
        mark = c.fetchone()[0].strftime("%Y-%m-%d %H:%M:%S.%f")
        c.execute(f"GRANT SELECT ON {s.db}.* TO '{s.reader}'@'%'")
        engine = SqlEngine(s.reader_url)
        service = SqlService(engine, timeout_s=10.0)
        try:
            queries = {
                f"SELECT price FROM prices FOR SYSTEM_TIME AS OF TIMESTAMP '{mark}'": [[10]],
                f"SELECT price FROM prices FOR SYSTEM_TIME AS OF {_AT}": [[10]],
                "SELECT price FROM prices FOR SYSTEM_TIME ALL AS p ORDER BY p.price": [[10], [20]],
                f"SELECT price FROM prices FOR SYSTEM_TIME BETWEEN '2000-01-01' AND '{mark}'": [[10]],
                "SELECT price FROM prices FOR SYSTEM_TIME FROM '2000-01-01' TO '2999-01-01' ORDER BY price": [
                    [10],
                    [20],
                ],
                "SELECT price FROM prices": [[20]],
            }
            for sql, rows in queries.items():
                assert service.query(sql, call_id="as-of")[0].rows == rows, sql
        finally:
            engine.close()
