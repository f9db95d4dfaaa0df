"""PostgreSQL: calls that build a value many times their arguments are capped at 64 MB before they
run (red team rt16 F8). PostgreSQL caps one value at 1 GB, but every value a row builds stays until
the row is done, so several add up: `array_to_string(array_fill(big, ARRAY[900]), '')` took a
backend to 3.8 GB, three such terms 3.2 GB against 1.3 GB for one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mcpkit.sql.admission import admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import assert_guarded_answers_alike

TIMEOUT_S = 20.0
MARKER = "mcpkit_size_bound"
# The contract, written out (not imported) so that these tests run, and fail, on code without it.
VALUE_TOO_LARGE = (
    "The query would build a value larger than this server allows (a JSON function, repeat, pad or"
    " replace over large values); apply it to smaller values."
)
BIG = "(SELECT repeat('x', 1000000) AS big) AS b"
GROWS = {
    "repeat": f"SELECT length(repeat(big, 100)) AS n FROM {BIG}",
    "array_fill": f"SELECT length(array_to_string(array_fill(big, ARRAY[100]), '')) AS n FROM {BIG}",
    "lpad": "SELECT length(lpad('x', 30000000, 'ab')) AS n",
    "replace": f"SELECT length(replace(big, 'x', repeat('y', 100))) AS n FROM {BIG}",
    "regexp_replace 'g'": f"SELECT length(regexp_replace(big, '', repeat('y', 100), 'g')) AS n FROM {BIG}",
}


@pytest.fixture
def service(pg_url: str) -> Iterator[SqlService]:
    engine = SqlEngine(pg_url)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


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
