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

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import changed, mysql_scratch, mysql_snapshot

pytestmark = [pytest.mark.mysql, pytest.mark.serial]


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


# More of the same class on MariaDB 10.11 (each answers NULL, a clipped or a made-up value with
# only a warning): the call fails as `data`, with the codes `MysqlSession.run` turns into errors.
# Not caught: FROM_UNIXTIME(-1), MAKEDATE(2023, 0), INET_ATON('x') answer NULL, FROM_DAYS(99999999)
# '0000-00-00' and CONV('zz', 10, 2) '0' with no warning at all (docs/security.md).
@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELECT STR_TO_DATE('2023-13-45', '%Y-%m-%d') AS d", 1411),  # NULL
        ("SELECT STR_TO_DATE('garbage', '%Y-%m-%d') AS d", 1411),  # NULL
        ("SELECT STR_TO_DATE('2023-12-31 10:00', '%Y-%m-%d') AS d", 1292),  # the time dropped
        ("SELECT DATE('2023-02-30') AS d", 1292),  # NULL
        ("SELECT CAST('2023-01-01 25:00:00' AS DATETIME) AS d", 1292),  # NULL
        ("SELECT DATEDIFF('x', '2023-01-01') AS d", 1292),  # NULL
        ("SELECT CAST('x' AS DECIMAL) AS d", 1292),  # 0
        ("SELECT CAST('18446744073709551616' AS UNSIGNED) AS n", 1292),  # clipped to 2^64 - 1
        ("SELECT CAST('1e400' AS DOUBLE) AS x", 1292),  # clipped to the largest double
        ("SELECT CAST(1e30 AS SIGNED) AS n", 1916),  # clipped to 2^63 - 1
        ("SELECT SEC_TO_TIME(99999999) AS t", 1292),  # clipped to 838:59:59
        ("SELECT DATE_SUB('0001-01-01', INTERVAL 1 DAY) AS d", 1441),  # NULL
        ("SELECT TIMESTAMPADD(YEAR, 10000, '2023-01-01') AS d", 1441),  # NULL
        # a JSON_TABLE column cut to its type: 'abc'; a bad date zeroed: 0000-00-00
        ("SELECT v FROM JSON_TABLE('[\"abcdefgh\"]', '$[*]' COLUMNS(v VARCHAR(3) PATH '$')) AS j", 1265),
        ("SELECT d FROM JSON_TABLE('[\"2023-02-30\"]', '$[*]' COLUMNS(d DATE PATH '$')) AS j", 1265),
        # valid JSON nested 41 deep: JSON_LENGTH answers NULL
        ("SELECT JSON_LENGTH(CONCAT(REPEAT('[', 41), REPEAT(']', 41))) AS n", 4040),
    ],
)
def test_mariadb_conversions_that_make_up_a_value_fail_as_data(
    reader: tuple[str, str, str], sql: str, code: int
) -> None:
    _, url, _ = reader
    engine = SqlEngine(url)
    try:
        with pytest.raises(QueryFailed) as wrong:
            SqlService(engine, timeout_s=10.0).query(sql, call_id="conv")
        assert wrong.value.kind == "data", sql
        assert engine.profile.classify(type("E", (Exception,), {})(code, "")) == "data"
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_rounding_notes_stay_answers(reader: tuple[str, str, str]) -> None:
    # 1265 and 1292 also come as Notes for rounding, which is no wrong answer (red team v10)
    _, url, _ = reader
    engine = SqlEngine(url)
    try:
        service = SqlService(engine, timeout_s=10.0)
        sql = "SELECT v FROM JSON_TABLE('[1.23456]', '$[*]' COLUMNS(v DECIMAL(4, 2) PATH '$')) AS j"
        assert service.query(sql, call_id="note")[0].rows == [[1.23]]
        sql = "SELECT CAST('2023-01-01 10:00:00.1234567' AS DATETIME(6)) AS d"
        assert service.query(sql, call_id="note2")[0].rows == [["2023-01-01T10:00:00.123456"]]
    finally:
        engine.close()


def test_mariadb_regexp_past_pcre_match_limit_fails_not_no_match(reader: tuple[str, str, str]) -> None:
    # Red team my11 F1: PCRE stops a backtracking-heavy match at its match limit and MariaDB answers
    # "no match" with only warning 1139: COUNT 0 for two matching rows, REGEXP_INSTR 0.
    _, url, _ = reader
    engine = SqlEngine(url)
    owners = "WITH o(owner) AS (SELECT 'alice' UNION ALL SELECT 'bob' UNION ALL SELECT 'alice') "
    try:
        service = SqlService(engine, timeout_s=10.0)
        count = (
            owners + "SELECT COUNT(*) AS n FROM o WHERE CONCAT(REPEAT('a', {k}), owner) REGEXP '(a+)+x|alice'"
        )
        # A quantifier on a group is now refused before it is sent (admission.regex_cost, red team
        # rt16 F2); the engine's own check is what stops one that reaches it another way (a view).
        with pytest.raises(Refused) as refused:
            service.query(count.format(k=5), call_id="re")
        assert refused.value.data == {"reason": "too_complex"}
        assert [list(r) for r in engine.execute(count.format(k=5), None, 10, 10.0, "re").rows] == [[2]]
        for sql in (
            count.format(k=40),
            "SELECT REGEXP_INSTR(CONCAT(REPEAT('a', 40), 'c'), '(a+)+b|c') AS v",
            "SELECT CONCAT(REPEAT('a', 40), 'c') REGEXP '(a+)+b|c' AS v",
        ):
            with pytest.raises(QueryFailed) as stopped:
                engine.execute(sql, None, 10, 10.0, "re-limit")
            assert stopped.value.kind == "resource", sql
        # The server's own 1139, a pattern that does not compile, is the agent's syntax to fix.
        with pytest.raises(QueryFailed) as bad:
            service.query("SELECT 'a' REGEXP '(' AS v", call_id="re-bad")
        assert bad.value.kind == "syntax"
    finally:
        engine.close()


def test_mariadb_a_wrong_answer_warning_behind_many_harmless_ones_still_fails(
    reader: tuple[str, str, str],
) -> None:
    # The server kept only its first 64 warnings (max_error_count): 99 harmless notes (CAST of a
    # negative number to UNSIGNED) hid the 1292 of '12abc' read as 12, and the call answered 12.
    _, url, _ = reader
    engine = SqlEngine(url)
    body = (
        "SELECT SUM(CAST(-n AS UNSIGNED)) AS s,"
        " SUM(CASE WHEN n = {n} THEN CAST('12abc' AS INTEGER) ELSE 0 END) AS v FROM r"
    )
    try:
        service = SqlService(engine, timeout_s=20.0)
        notes = _rows(1000, "SELECT SUM(CAST(-n AS UNSIGNED)) AS s FROM r")
        assert service.query(notes, call_id="notes")[0].rows == [[str(1000 * 2**64 - 500_500)]]
        with pytest.raises(QueryFailed) as hidden:
            service.query(_rows(100, body.format(n=100)), call_id="hidden")
        assert hidden.value.kind == "data"
        # Past what the server can keep (65535) the rest cannot be read: refused, not answered.
        with pytest.raises(QueryFailed) as unread:
            service.query(_rows(70_000, body.format(n=70_000)), call_id="unread")
        assert unread.value.kind == "resource"
    finally:
        engine.close()


def test_mariadb_sformat_is_left_out_and_its_null_answers_fail(reader: tuple[str, str, str]) -> None:
    # Red team my11 F2: SFORMAT past max_allowed_packet answers NULL with no warning at all, and a
    # bad format or argument NULL with only warning 4183.
    _, url, _ = reader
    engine = SqlEngine(url)
    over = "SELECT SFORMAT('{:>17000000}', 'x') IS NULL AS n"
    try:
        with pytest.raises(Refused) as left_out:
            SqlService(engine, timeout_s=10.0).query(over, call_id="sf")
        assert "--allow-function sformat" in str(left_out.value)
        # An operator who allows it by name gets the right answers or the `data` error.
        allowed = SqlService(
            engine, timeout_s=10.0, functions=FunctionPolicy.for_dialect("mysql", extra=["sformat"])
        )
        assert allowed.query("SELECT SFORMAT('{:>5}', 'x') AS v", call_id="sf-ok")[0].rows == [["    x"]]
        with pytest.raises(QueryFailed) as bad:
            allowed.query("SELECT SFORMAT('{:d}', 'x') AS v", call_id="sf-bad")
        assert bad.value.kind == "data"
    finally:
        engine.close()
