"""PostgreSQL: calls that build a value many times their arguments are capped at 64 MB before they
run (red team rt16 F8), and so are splits into many elements, regular expressions that record every
match, jsonb_object's key sort and a concatenation chain's intermediates (issue 10). PostgreSQL
caps one value at 1 GB, but every value a row builds stays until the row is done, so several add
up: `array_to_string(array_fill(big, ARRAY[900]), '')` took a backend to 3.8 GB, three such terms
3.2 GB against 1.3 GB for one.
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
BIG = "(SELECT repeat('x', 1000000) AS big) AS b"
GROWS = {
    "repeat": f"SELECT length(repeat(big, 100)) AS n FROM {BIG}",
    "array_fill": f"SELECT length(array_to_string(array_fill(big, ARRAY[100]), '')) AS n FROM {BIG}",
    "lpad": "SELECT length(lpad('x', 30000000, 'ab')) AS n",
    "replace": f"SELECT length(replace(big, 'x', repeat('y', 100))) AS n FROM {BIG}",
    "regexp_replace 'g'": f"SELECT length(regexp_replace(big, '', repeat('y', 100), 'g')) AS n FROM {BIG}",
    # one element per character, about 40 bytes each (20M characters: 809 MB)
    "string_to_array NULL": f"SELECT cardinality(string_to_array(repeat(big, 2), NULL)) AS n FROM {BIG}",
    "string_to_array ','": "SELECT cardinality(string_to_array(repeat(',', 2000000), ',')) AS n",
    # every match recorded before the first answer, about 14 bytes per character (10M: 142 MB)
    "regexp_matches 'g'": "SELECT count(*) AS n FROM (SELECT repeat('a', 5000000) AS t) s,"
    " regexp_matches(s.t, 'a', 'g')",
    "regexp_count": "SELECT regexp_count(repeat('a', 5000000), 'a') AS n",
    "regexp_substr": "SELECT regexp_substr(repeat('a', 5000000), 'a', 1, 4000000) AS n",
    # keys sorted with no interrupt check (two arrays of 3M keys: 8 s past a 1 s timeout, 2.7 GB)
    "jsonb_object": "SELECT length(jsonb_object(k)::text) AS n FROM (SELECT array_agg(g::text) AS k"
    " FROM generate_series(1, 500000) g) AS a",
    # (b || b) || b ...: each intermediate stays until the row is done (200 over 64 KB: 1.3 GB)
    "concatenation chain": "SELECT length(" + " || ".join(["big"] * 100) + ") AS n"
    " FROM (SELECT repeat('x', 65536) AS big) AS b",
}


service = pg_service_fixture(TIMEOUT_S)


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(GROWS))
def test_postgres_a_value_past_64_mb_fails_before_it_is_built(name: str, service: SqlService) -> None:
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(GROWS[name], call_id="grow")
    assert info.value.kind == "resource"
    assert info.value.message == VALUE_TOO_LARGE
    assert time.monotonic() - started < 5.0


@pytest.mark.postgres
def test_postgres_small_splits_matches_objects_and_chains_answer_as_unguarded(service: SqlService) -> None:
    sql = (
        "SELECT string_to_array(x, NULL) AS s, string_to_array(x || ',' || y, ',') AS c,"
        " (SELECT array_agg(m[1]) FROM regexp_matches(x || y, '(\\d)', 'g') AS m) AS m,"
        " regexp_count(x, '\\d') AS rc, regexp_substr(x, '\\d', 1, 2) AS rs, regexp_instr(x, '2') AS ri,"
        " jsonb_object(ARRAY[x, y]) AS j, jsonb_object(ARRAY[x], ARRAY[y]) AS j2,"
        " x || ',' || y || ',' || x || ',' || y AS chain, concat(concat(x, y), x, y) AS nested"
        " FROM (VALUES ('42', 'a'), ('7', 'b')) AS v(x, y) ORDER BY x"
    )
    sent = service.admit(sql, 10).sql
    assert sent.count(MARKER) >= 6
    assert_guarded_answers_alike(service, sent, sql, 2, TIMEOUT_S)


@pytest.mark.postgres
def test_postgres_small_builders_answer_as_unguarded(service: SqlService) -> None:
    sql = (
        "SELECT repeat('-', 8) AS r, lpad(x, 5, '0') AS l, rpad(x, n) AS p, array_fill(x, ARRAY[2]) AS f,"
        " replace(x, '4', 'four') AS c, regexp_replace(x, '', '.', 'g') AS g"
        " FROM (VALUES ('42', 3), ('7', 4)) AS v(x, n) ORDER BY x"
    )
    sent = service.admit(sql, 10).sql
    assert MARKER in sent
    assert_guarded_answers_alike(service, sent, sql, 2, TIMEOUT_S)


def test_literal_builders_and_one_byte_replacements_are_sent_as_written() -> None:
    sql = (
        "SELECT repeat('-', 80), lpad('5', 3, '0'), replace(x, ',', ';'), regexp_replace(x, 'a', 'bb') FROM t"
    )
    assert MARKER not in admit(sql, "postgres").sql


def test_short_chains_single_matches_and_empty_delimiters_are_sent_as_written() -> None:
    sql = (
        "SELECT a || ' ' || b, '%' || a || '%', a || b || c, regexp_matches(a, '(x)'),"
        " string_to_array(a, ''), count(*)::text || ':' || max(a) || '-' || min(b) FROM t GROUP BY a, b, c"
    )
    assert MARKER not in admit(sql, "postgres").sql


def test_a_constant_leaf_of_a_guarded_chain_is_sent_as_a_subquery() -> None:
    # PostgreSQL folds an immutable sub-chain of constants while planning, before any guard runs
    sent = admit("SELECT " + " || ".join(["repeat('x', 1000000)"] * 5) + " || b FROM t", "postgres").sql
    assert MARKER in sent
    assert "(SELECT REPEAT('x', 1000000))" in sent and " REPEAT('x', 1000000) ||" not in sent


@pytest.mark.postgres
@pytest.mark.parametrize("call", ["pg_catalog.repeat(big, 100)", "pg_catalog.strpos(big, big)"])
def test_postgres_a_schema_qualified_bounded_builtin_is_refused(call: str, service: SqlService) -> None:
    # sqlglot reads pg_catalog.f(...) as an untyped call whose arguments have no names to bound: it
    # was sent unguarded (pg_catalog.repeat(big, 100) built 100 MB)
    with pytest.raises(Refused) as info:
        service.query(f"SELECT length({call}::text) AS n FROM {BIG}", call_id="qualified")
    assert info.value.data == {"reason": "function"}
    assert "without its pg_catalog. prefix" in info.value.message
    answered, _ = service.query(
        "SELECT pg_catalog.upper('a') AS u, pg_catalog.length('ab') AS n", call_id="q"
    )
    assert answered.rows == [["A", 2]]
