"""MariaDB's JSON functions that build past every server limit fail fast as `resource`.

JSON_EXTRACT, JSON_SET/INSERT/REPLACE/ARRAY_APPEND/ARRAY_INSERT, JSON_MERGE*, JSON_QUOTE, JSON_SEARCH
'all', MAKE_SET and DATE_FORMAT/TIME_FORMAT check neither max_allowed_packet (as REPEAT and CONCAT
do) nor max_session_mem_used: nested, each level doubles, so a few calls over one 8 MB value built
128 MB in the server, and more levels gigabytes; JSON_SEARCH 'all' grows with the square of its
document (`admission.bound_searches`, `GrowthBound`). The first test shows the server does build them;
with the guard, the call fails before the value is built, and small documents answer as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import assert_guarded_answers_alike, mysql_scratch

TIMEOUT_S = 5.0
PACKET = 16 * 1024 * 1024
# The contract, written out (not imported) so that these tests run, and fail, on code without it.
VALUE_TOO_LARGE = (
    "The query would build a value larger than this server allows (a JSON function, repeat, pad,"
    " replace, a split, a regular expression or a long concatenation over large values); apply it to"
    " smaller values."
)
PATHS_TOO_LARGE = (
    "JSON_EXTRACT with several paths (or a ** or computed path) over a document this large would build"
    " a value larger than this server allows; extract one literal path per call."
)
DOC = "CONCAT('[\"', REPEAT('a', 3000000), '\"]')"  # 3 MB: every function below stays under the packet
DEEP = "CONCAT(REPEAT('{\"a\": ', 30), '\"', REPEAT('x', 700000), '\"', REPEAT('}', 30))"
PATHS = ", ".join(["'$'"] * 8)
GROWS = {
    "JSON_MERGE_PRESERVE nested": f"SELECT LENGTH(JSON_MERGE_PRESERVE(JSON_MERGE_PRESERVE({DOC}, {DOC}),"
    f" JSON_MERGE_PRESERVE({DOC}, {DOC}), JSON_MERGE_PRESERVE({DOC}, {DOC}))) AS n",
    "JSON_MERGE_PATCH": f"SELECT LENGTH(JSON_MERGE_PATCH('{{\"a\": 1}}', JSON_OBJECT('b', {DOC}),"
    f" JSON_OBJECT('c', {DOC}), JSON_OBJECT('d', {DOC}), JSON_OBJECT('e', {DOC}),"
    f" JSON_OBJECT('f', {DOC}), JSON_OBJECT('g', {DOC}))) AS n",
    "JSON_SET of many values": "SELECT LENGTH(JSON_SET('{}', "
    + ", ".join(f"'$.k{i}', REPEAT('a', 3000000)" for i in range(7))
    + ")) AS n",
    "JSON_ARRAY_APPEND": f"SELECT LENGTH(JSON_ARRAY_APPEND({DOC}, "
    + ", ".join("'$', REPEAT('a', 3000000)" for _ in range(7))
    + ")) AS n",
    "JSON_EXTRACT of many paths": f"SELECT LENGTH(JSON_EXTRACT({DOC}, {PATHS})) AS n",
    "JSON_EXTRACT '$**'": f"SELECT LENGTH(JSON_EXTRACT({DEEP}, '$**.a')) AS n",
    "JSON_QUOTE nested": "SELECT LENGTH(JSON_QUOTE(JSON_QUOTE(REPEAT('\"', 5000000)))) AS n",
    # each match's path repeats the 10 KB key above it: 50 KB answered 100 MB
    "JSON_SEARCH 'all'": "SELECT LENGTH(JSON_SEARCH(CONCAT('{\"', REPEAT('k', 10000), '\": [',"
    " REPEAT('\"a\",', 10000), '\"a\"]}'), 'all', 'a')) AS n",
    "DATE_FORMAT": "SELECT LENGTH(DATE_FORMAT('2026-12-02', REPEAT('%W', 5000000))) AS n",
    "MAKE_SET": "SELECT LENGTH(MAKE_SET(7, REPEAT('a', 6000000), REPEAT('b', 6000000),"
    " REPEAT('c', 6000000))) AS n",
}
SMALL = """
WITH v AS (SELECT '{"a": {"a": {"b": [1, 2]}}, "c": "x\\\\"y"}' AS d, 'q"t' AS s
           UNION ALL SELECT '[1, [2, [3]]]', NULL UNION ALL SELECT 'not json', '')
SELECT d, JSON_EXTRACT(d, '$.a') AS e1, JSON_EXTRACT(d, '$**.b', '$.c') AS e2, JSON_EXTRACT(d, '$[*]') AS e3,
       JSON_SET(d, '$.z', s) AS st, JSON_INSERT(d, '$.y', 1) AS ins, JSON_REPLACE(d, '$.c', s) AS rp,
       JSON_ARRAY_APPEND(d, '$', s) AS ap, JSON_ARRAY_INSERT(d, '$[0]', 0) AS ai,
       JSON_MERGE_PRESERVE(d, JSON_MERGE(d, '{"m": 1}')) AS mp, JSON_MERGE_PATCH(d, '{"c": null}') AS pa,
       JSON_QUOTE(s) AS q, JSON_DETAILED(d) AS dt, JSON_SEARCH(d, 'all', 'x%') AS sa,
       MAKE_SET(5, d, s, 'z') AS ms, DATE_FORMAT('2026-12-02', CONCAT('%W ', s)) AS df
FROM v ORDER BY d
"""


@pytest.fixture(scope="module")
def reader(mysql_url: str) -> Iterator[str]:
    with mysql_scratch(mysql_url, "jg") as s, s.admin.cursor() as c:
        c.execute(f"GRANT SELECT ON {s.db}.* TO '{s.reader}'@'%'")
        yield s.reader_url


@pytest.fixture
def service(reader: str) -> Iterator[SqlService]:
    engine = SqlEngine(reader)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


@pytest.mark.mysql
@pytest.mark.parametrize("name", sorted(GROWS))
def test_mariadb_builds_these_past_its_packet_and_the_guard_fails_them_first(
    name: str, service: SqlService
) -> None:
    engine = service.engine
    assert isinstance(engine, SqlEngine)
    built = engine.execute(GROWS[name], None, 1, 30.0, "unguarded").rows[0][0]
    assert built is not None and built > PACKET, built  # the server itself checks nothing
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(GROWS[name], call_id="json-growth")
    assert time.monotonic() - started < TIMEOUT_S
    assert info.value.kind == "resource"
    assert info.value.message == (PATHS_TOO_LARGE if name.startswith("JSON_EXTRACT") else VALUE_TOO_LARGE)
    result, _ = service.query("SELECT 1 AS alive", call_id="after")
    assert result.rows == [[1]]


@pytest.mark.mysql
def test_mariadb_json_extract_of_several_paths_says_one_path_per_call(service: SqlService) -> None:
    # 5 MB: two paths pass the packet
    doc = "CONCAT('{\"a\": \"', REPEAT('x', 5000000), '\", \"b\": 1}')"
    with pytest.raises(QueryFailed) as info:
        service.query(f"SELECT LENGTH(JSON_EXTRACT({doc}, '$.a', '$.b')) AS n", call_id="paths")
    assert (info.value.code, info.value.kind) == ("TOOL_ERROR", "resource")
    assert info.value.data == {"reason": "resource", "call_id": "paths"}
    assert info.value.message == PATHS_TOO_LARGE
    one_each = f"SELECT LENGTH(JSON_EXTRACT({doc}, '$.a')) AS a, JSON_EXTRACT({doc}, '$.b') AS b"
    result, _ = service.query(one_each, call_id="one-path-each")  # what the sentence says to do
    assert result.rows == [[5000002, "1"]]


@pytest.mark.mysql
def test_mariadb_small_json_answers_as_unguarded(service: SqlService) -> None:
    sent = service.admit(SMALL, 100).sql
    assert sent.count("mcpkit_size_bound") >= 13
    assert_guarded_answers_alike(service, sent, SMALL, 3, TIMEOUT_S)


@pytest.mark.mysql
def test_mariadb_one_plain_json_path_is_sent_as_written(service: SqlService) -> None:
    sql = "SELECT JSON_EXTRACT('[1, 2]', '$[*]') AS a, JSON_EXTRACT('{\"a\": 1}', '$.a') AS b"
    assert "mcpkit_size_bound" not in service.admit(sql, 10).sql
