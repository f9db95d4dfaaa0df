"""MariaDB answers some over-limit results with a warning and a wrong value (red team, break 11).

GROUP_CONCAT stops at group_concat_max_len and REPEAT past max_allowed_packet answers NULL, each
with only a warning, in every sql_mode. The server raises the first limit for its session to the
cell budget and fails the call on either warning: the model gets an error, never a cut answer.
No global setting is changed (the fingerprint includes the server's variables).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import changed, mysql_scratch, mysql_snapshot

pytestmark = pytest.mark.mysql


@pytest.fixture
def reader(mysql_url: str) -> Iterator[tuple[str, str, str]]:
    with mysql_scratch(mysql_url, "tr") as scratch:
        with scratch.admin.cursor() as c:
            c.execute(f"GRANT SELECT ON {scratch.db}.* TO '{scratch.reader}'@'%'")
        yield scratch.admin_url, scratch.reader_url, scratch.db


def _rows(n: int, body: str) -> str:
    return f"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {n}) {body}"


def test_mariadb_cut_results_are_errors_not_answers(reader: tuple[str, str, str], tmp_path: Path) -> None:
    admin_url, url, db = reader
    before = mysql_snapshot(admin_url, db, tmp_path)
    engine = SqlEngine(url)
    service = SqlService(engine, timeout_s=30.0)
    try:
        # Past the server's default 1 MiB, now answered in full: the red team's query.
        sql = _rows(300_000, "SELECT COUNT(*) AS n, LENGTH(GROUP_CONCAT(n)) AS len FROM r")
        truth = sum(len(str(i)) for i in range(1, 300_001)) + 299_999
        assert service.query(sql, call_id="gc")[0].rows == [[300_000, truth]]
        # Past the session's limit (32 MiB): an error, not a shorter string.
        over = _rows(40_000, "SELECT LENGTH(GROUP_CONCAT(REPEAT('x', 1000))) AS len FROM r")
        with pytest.raises(QueryFailed) as cut:
            service.query(over, call_id="gc-over")
        assert cut.value.kind == "resource"
        # REPEAT over max_allowed_packet: an error, not NULL.
        with pytest.raises(QueryFailed) as nulled:
            service.query("SELECT LENGTH(REPEAT('x', 20000000)) AS len", call_id="repeat")
        assert nulled.value.kind == "resource"
        # A conversion that made up its value (issue 11): an error on the data, not an answer.
        for sql in (
            "SELECT CAST(99999999999999999999 AS SIGNED) AS n",
            "SELECT CAST('12abc' AS INTEGER) + 0 AS n",
            "SELECT CAST('2023-02-30' AS DATE) AS d",
            "SELECT STR_TO_DATE('xx', '%d/%m/%Y') AS d",
            "SELECT 1 / 0 AS q",
            "SELECT CAST(99999 AS DECIMAL(3, 1)) AS d",
            "SELECT DATE_ADD('9999-12-31', INTERVAL 1 DAY) AS d",
            "SELECT CONVERT('\u00e4' USING ascii) AS a",
            _rows(3, "SELECT COUNT(*) AS n FROM r WHERE n = '1x'"),  # '1x' compared as 1
        ):
            with pytest.raises(QueryFailed) as wrong:
                service.query(sql, call_id="conv")
            assert wrong.value.kind == "data", sql
        # Other warnings still answer: CAST to UNSIGNED wraps a negative number, as documented.
        assert service.query("SELECT CAST(-1 AS UNSIGNED) AS n", call_id="w")[0].rows == [[2**64 - 1]]
    finally:
        engine.close()
    assert changed(before, mysql_snapshot(admin_url, db, tmp_path)) == []
