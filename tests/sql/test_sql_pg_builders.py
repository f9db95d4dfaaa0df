"""PostgreSQL: the value builders an independent red team found off the list (pg17 F1) are capped at
64 MB before they run, as repeat and lpad are (test_sql_pg_growth.py): format's padding (three
`format('%*s', 9e8, 'x')` took a backend to 3.4 GB and ran 11.6 s past a 5 s timeout), encode nested
through convert_to (1.3 GB), to_json's escapes, to_char's template, a concatenation that repeats
its operand (27 steps of `s || s` in a recursive CTE: 1.6 GB; array_cat(a, a) three times: 1.1 GB).
A guard computes a computed operand once (nested, each guard computed the level below twice).
"""

from __future__ import annotations

import time

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import admit
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import assert_guarded_answers_alike, pg_service_fixture

TIMEOUT_S = 20.0
MARKER = "mcpkit_size_bound"
# The contract, written out (not imported) so that these tests run, and fail, on code without it.
VALUE_TOO_LARGE = (
    "The query would build a value larger than this server allows (a JSON function, repeat, pad,"
    " replace, a split, a regular expression or a long concatenation over large values); apply it to"
    " smaller values."
)
# computed per row (not folded while planning): `big` is 1 MB, `n` 1
ROW = "(SELECT repeat('x', 1000000 + g - 1) AS big, g AS n FROM generate_series(1, 1) AS g) AS b"
BUILDS = {
    "format %*s": f"SELECT length(format('%*s', 100000000 * n, 'x')) AS n FROM {ROW}",
    "format %-*s": f"SELECT length(format('%-*s', 100000000 * n, 'x')) AS n FROM {ROW}",
    "format positional width": f"SELECT length(format('%1$*2$s', 'x', 100000000 * n)) AS n FROM {ROW}",
    "format literal width": f"SELECT length(format('%100000000s', big)) AS n FROM {ROW}",
    "format positional repeat": "SELECT length(format('" + "%1$s" * 70 + f"', big)) AS n FROM {ROW}",
    "format computed template": f"SELECT length(format(repeat('%1$s', 70 * n), big)) AS n FROM {ROW}",
    "format variadic": "SELECT length(format('" + "%1$s" * 70 + f"', VARIADIC ARRAY[big])) AS n FROM {ROW}",
    "encode hex nested": "SELECT length(encode(convert_to(encode(convert_to(encode(convert_to("
    f"repeat(big, 10), 'UTF8'), 'hex'), 'UTF8'), 'hex'), 'UTF8'), 'hex')) AS n FROM {ROW}",
    "encode escape": f"SELECT length(encode(convert_to(repeat(big, 20), 'UTF8'), 'escape')) AS n FROM {ROW}",
    "to_json escapes": f"SELECT length(to_json(repeat(chr(1), 12000000 * n))::text) AS n FROM {ROW}",
    "to_jsonb of a row": "SELECT length(to_jsonb(b)::text) AS n"
    f" FROM (SELECT repeat(big, 12) AS r FROM {ROW}) AS b",
    "to_char template": f"SELECT length(to_char(now(), repeat('FMMonth', 400000 * n))) AS n FROM {ROW}",
    "quote_literal": f"SELECT length(quote_literal(repeat('''', 40000000 * n))) AS n FROM {ROW}",
    "recursive doubling": "WITH RECURSIVE r(s, k) AS (SELECT 'xxxxxxxx'::text, 0 UNION ALL"
    " SELECT s || s, k + 1 FROM r WHERE k < 24) SELECT max(length(s)) AS n FROM r",
    "array_cat doubling": "SELECT cardinality(array_cat(array_cat(a, a), array_cat(a, a))) AS n"
    f" FROM (SELECT array_fill(big, ARRAY[20]) AS a FROM {ROW}) AS s",
    "array || array": "SELECT cardinality(a || a || a) AS n"
    f" FROM (SELECT array_fill(big, ARRAY[25]) AS a FROM {ROW}) AS s",
    "concat of a value twice": f"SELECT length(concat(repeat(big, 40), repeat(big, 40))) AS n FROM {ROW}",
    "concat_ws separator": f"SELECT length(concat_ws(repeat(big, 40), 'a', 'b', 'c')) AS n FROM {ROW}",
}


service = pg_service_fixture(TIMEOUT_S)


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_postgres_a_built_value_past_64_mb_fails_before_it_is_built(name: str, service: SqlService) -> None:
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(BUILDS[name], call_id="build")
    assert info.value.kind == "resource"
    assert info.value.message == VALUE_TOO_LARGE
    assert time.monotonic() - started < 5.0


@pytest.mark.postgres
def test_postgres_small_builders_and_concatenations_answer_as_unguarded(service: SqlService) -> None:
    sql = (
        "SELECT format('%-*s|%5s|%1$s', n, x, y) AS f, format(x || '%s', y) AS fc, encode(convert_to(x,"
        " 'UTF8'), 'base64') AS e, to_json(x) AS j, to_jsonb(v) AS jb, to_char(n, '000') AS c,"
        " quote_literal(x) AS q, x || x AS d, concat(y, y) AS cc, concat_ws(y, x, x) AS w,"
        " format('%s-%s', VARIADIC ARRAY[x, y]) AS fv,"
        " array_cat(ARRAY[x], ARRAY[x]) AS a, ARRAY[n] || ARRAY[n] AS an, array_append(ARRAY[x], x) AS aa"
        " FROM (VALUES ('42', 'a''b', 3), ('7', 'c', 4)) AS v(x, y, n) ORDER BY x"
    )
    sent = service.admit(sql, 10).sql
    assert sent.count(MARKER) >= 10
    assert_guarded_answers_alike(service, sent, sql, 2, TIMEOUT_S)
    recursive = (
        "WITH RECURSIVE r(s, k) AS (SELECT 'ab'::text, 0 UNION ALL SELECT s || s, k + 1 FROM r WHERE k < 3)"
        " SELECT s, k FROM r ORDER BY k"
    )
    sent = service.admit(recursive, 10).sql
    assert MARKER in sent
    assert_guarded_answers_alike(service, sent, recursive, 4, TIMEOUT_S)


@pytest.mark.postgres
def test_postgres_a_random_count_is_computed_once_for_its_guard_and_its_call(service: SqlService) -> None:
    # the guard and the call each computed random(): one could pass 64 MB while the other was under
    sql = "SELECT length(repeat('x', (random() * 1000)::int + 100000000)) AS n"
    assert service.admit(sql, 10).sql.upper().count("RANDOM()") == 1
    with pytest.raises(QueryFailed) as info:
        service.query(sql, call_id="random")
    assert info.value.message == VALUE_TOO_LARGE
    with pytest.raises(Refused) as refused:  # an aggregate beside it cannot be held: refused
        service.query(
            "SELECT repeat('x', (random() * 10)::int + count(*)::int) AS r FROM (VALUES (1)) v(a)",
            call_id="agg",
        )
    assert refused.value.data == {"reason": "function"}


def test_a_nested_builder_computes_each_level_once() -> None:
    sent = admit(
        "SELECT encode(convert_to(encode(convert_to(encode(convert_to(t.body, 'UTF8'), 'hex'), 'UTF8'),"
        " 'hex'), 'UTF8'), 'hex') FROM t",
        "postgres",
    ).sql
    assert sent.count(MARKER) == 3
    assert sent.count("convert_to(") == 3 and sent.count("OFFSET 0") == 3


def test_concatenations_of_plain_columns_and_plain_formats_are_sent_as_written() -> None:
    sql = (
        "SELECT a || ' ' || b, concat(a, b), concat_ws(', ', a, b, c), format('%s: %s', a, b),"
        " array_cat(x, y), to_char(d, 'YYYY-MM-DD'), encode('abc'::bytea, 'hex') FROM t"
    )
    assert MARKER not in admit(sql, "postgres").sql


@pytest.mark.postgres
def test_postgres_a_builder_over_a_grouped_expression_answers(service: SqlService) -> None:
    # its operand was held in a subquery reading `x`, grouped only within `upper(x)`: PostgreSQL
    # refused it ("subquery uses ungrouped column"); such an operand is left in place
    rows = "FROM (VALUES ('a', 1), ('b', 2), ('a', 3)) AS v(x, k)"
    sql = (
        f"SELECT repeat(upper(x), 3) AS r, upper(x) || repeat(lower(x), 2) AS c, count(*) AS n"
        f" {rows} GROUP BY upper(x), lower(x) ORDER BY 1"
    )
    sent = service.admit(sql, 10).sql
    assert sent.count(MARKER) >= 2
    assert_guarded_answers_alike(service, sent, sql, 2, TIMEOUT_S)
    inside = f"SELECT upper(x) AS u, string_agg(repeat(lower(x), k), ',') AS s {rows} GROUP BY 1 ORDER BY 1"
    sent = service.admit(inside, 10).sql
    assert "OFFSET 0" in sent  # an aggregate's argument reads its group's rows: held
    assert_guarded_answers_alike(service, sent, inside, 2, TIMEOUT_S)
