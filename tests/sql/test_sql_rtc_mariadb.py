"""Red team rtC on MariaDB 10.11 (no masks): error hygiene.

L2: a filter comparing a text column with a number (`name = 1`) warns 1292 on every row it reads;
past the 65,535 warnings the server keeps, the call failed as "more warnings than were kept" and
answered the resource sentence ("aggregate or filter in SQL first"), where the query needs its type
fixed. A warning of its own now names the failure (`data`) before the count does.

F10: a 1,474-character query of 39 LOCATEs (under `QUEUED_FROM`, so it takes an analysis slot only
once slow) spent its guard-writing pass, the regeneration and the second parse, about 0.25 s of CPU,
before the first check between passes queued it: eight at once delayed others' `SELECT 1` by up to
2.4 s. The check now runs at each guarded call and after the regeneration.
"""

from __future__ import annotations

import pytest

from mcpkit.sql.admission.admit import admit
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


def test_rtc_f10_a_short_text_slow_to_guard_is_checked_at_each_guarded_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcpkit.sql.admission import bound_searches

    checks: list[None] = []
    monkeypatch.setattr(bound_searches, "queue_if_slow", lambda: checks.append(None))
    sql = "SELECT " + " + ".join(f"LOCATE('b{'a' * i}', t)" for i in range(1, 40)) + " FROM big WHERE id = 1"
    assert len(sql) < 2_000  # a short text: no slot until it is slow
    admit(sql, "mysql")
    assert len(checks) >= 39
