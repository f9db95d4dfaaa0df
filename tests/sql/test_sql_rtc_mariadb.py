"""Red team rtC on MariaDB 10.11 (no masks): error hygiene.

L2: a filter comparing a text column with a number (`name = 1`) warns 1292 on every row it reads;
past the 65,535 warnings the server keeps, the call failed as "more warnings than were kept" and
answered the resource sentence ("aggregate or filter in SQL first"), where the query needs its type
fixed. A warning of its own now names the failure (`data`) before the count does.
"""

from __future__ import annotations

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import mysql_scratch


@pytest.mark.mysql
def test_rtc_l2_a_type_mismatch_over_many_rows_is_a_data_failure(mysql_url: str) -> None:
    with mysql_scratch(mysql_url, "fixc_l2") as db:
        with db.admin.cursor() as c:
            c.execute(f"CREATE TABLE {db.db}.fixc_rows (id INT PRIMARY KEY, name VARCHAR(20))")
            rows = f"SELECT seq, CONCAT('n', seq) FROM {db.db}.seq_1_to_70000"
            c.execute(f"INSERT INTO {db.db}.fixc_rows {rows}")
            c.execute(f"GRANT SELECT ON {db.db}.* TO '{db.reader}'@'%'")
        engine = SqlEngine(db.reader_url, pool_size=1)
        try:
            service = SqlService(engine, timeout_s=10.0)
            for sql in (
                "SELECT * FROM fixc_rows WHERE name = 1 LIMIT 1",
                "SELECT count(*) FROM fixc_rows WHERE name = 2",
            ):
                with pytest.raises(QueryFailed) as info:
                    service.query(sql, call_id="rtc-l2")
                assert info.value.data is not None and info.value.data["reason"] == "data", sql
                assert "fix the expression" in str(info.value)
            # what stays: a filter of the right type answers
            rows = service.query("SELECT count(*) FROM fixc_rows WHERE name = 'n7'", call_id="rtc-l2")[0].rows
            assert rows == [[1]]
        finally:
            engine.close()
