"""PostgreSQL work no interrupt reaches, rebuilt from the red team's findings (F2, F6, F8).

Each large case below, unbounded, ignored `statement_timeout` and the cancel: the call answered
TIMEOUT at its deadline plus the watchdog's grace and the backend kept computing for seconds after
(figures in docs/security.md, "Every call is bounded"). Bounded, the database raises the guard's
marked error before the work starts: the call fails as `resource` before the timeout, nothing of
the reader's is left running, and the database is as it was. (F1, a failed cast's error quoting
its whole input, is `test_sql_engine_limits.py`'s.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import PgScratch, assert_guarded_answers_alike, pg_scratch

TIMEOUT_S = 3.0
# The contract, written out (not imported) so that these tests run, and fail, on code without it.
SEARCH_TOO_LARGE = "The query searches strings too large to search within the time limit; narrow it."
MARKS = "repeat(chr(790) || chr(769), 20000)"  # combining marks of classes 220, 230, ...: sorted by swaps
BREAKS = {
    # F2: element-by-element comparisons with no interrupt check (each ran 5-23 s on a 1 s timeout)
    "jsonb @> (every element found)": "SELECT j @> k FROM (SELECT jsonb_agg(g) AS j,"
    " jsonb_agg(g ORDER BY g DESC) AS k FROM generate_series(1, 30000) g) s",
    "jsonb <@": "SELECT k <@ j FROM (SELECT jsonb_agg(g) AS j, jsonb_agg(g ORDER BY g DESC) AS k"
    " FROM generate_series(1, 30000) g) s",
    "jsonb ?&": "SELECT j ?& k FROM (SELECT jsonb_agg(g::text) AS j, array_agg(g::text ORDER BY g DESC) AS k"
    " FROM generate_series(1, 50000) g) s",
    "jsonb - text[]": "SELECT jsonb_typeof(j - k) FROM (SELECT jsonb_object_agg(g::text, 1) AS j,"
    " array_agg((-g)::text) AS k FROM generate_series(1, 70000) g) s",
    "a jsonb column - text[]": "SELECT jsonb_typeof(j - (SELECT array_agg((-g)::text)"
    " FROM generate_series(1, 70000) g)) FROM docs WHERE id = 0",
    "array <@ of string_to_array": "SELECT a <@ b FROM (SELECT"
    " string_to_array(string_agg(g::text, ','), ',') AS a,"
    " string_to_array(string_agg(g::text, ',' ORDER BY g DESC), ',') AS b"
    " FROM generate_series(1, 30000) g) s",
    "array @> of array_agg": "SELECT a @> b FROM (SELECT array_agg(g) AS a, array_agg(g ORDER BY g DESC) AS b"
    " FROM generate_series(1, 80000) g) s",
    # F6: Unicode normalization sorts a run of combining marks by swapping neighbours
    "normalize": f"SELECT length(normalize({MARKS}))",
    "normalize NFKD": f"SELECT length(normalize({MARKS}, NFKD))",
    "is_normalized NFD": f"SELECT is_normalized({MARKS}, 'NFD')",
    "normalize of a column": "SELECT length(normalize(body, NFD)) FROM docs WHERE id = 1",
    # F8: each trimmed character scans the whole set
    "ltrim(s, chars)": "SELECT length(ltrim(repeat('a', 3000000), repeat('b', 5000) || 'a'))",
    "btrim(s, chars)": "SELECT length(btrim(repeat('a', 3000000), repeat('b', 5000) || 'a'))",
}
SMALL = """
SELECT j - k AS minus, j - ARRAY['a'] AS literal, j @> '{"a": 1}' AS contains, 7 - 2 AS seven,
       now() - interval '1 day' < now() AS yesterday, n - m AS numbers, d - 1 AS day_before,
       normalize(s) AS nfc, normalize(s, NFD) AS nfd, is_normalized(s, 'NFD') AS is_nfd,
       ltrim(s, 'éa') AS lt
FROM (VALUES ('{"a": 1, "b": 2}'::jsonb, ARRAY['b', 'x'], 5.5, 2, date '2024-03-01', 'éa' || chr(769)),
             ('{}'::jsonb, ARRAY[]::text[], 1, NULL, date '2024-01-01', 'plain')) v(j, k, n, m, d, s)
ORDER BY nfc
"""


@pytest.fixture(scope="module")
def scratch(pg_url: str) -> Iterator[PgScratch]:
    """A reader on `docs`: row 0 a jsonb object of 70,000 keys, row 1 a text of 40,000 combining marks."""
    with pg_scratch(pg_url, "pgb") as s:
        s.admin.execute("CREATE TABLE docs (id int PRIMARY KEY, j jsonb, body text)")
        s.admin.execute(
            "INSERT INTO docs SELECT 0, jsonb_object_agg(g::text, 1), NULL FROM generate_series(1, 70000) g"
        )
        s.admin.execute(f"INSERT INTO docs VALUES (1, NULL, {MARKS})")
        s.admin.execute(f"GRANT SELECT ON docs TO {s.reader}")
        yield s


@pytest.fixture
def service(scratch: PgScratch) -> Iterator[SqlService]:
    engine = SqlEngine(scratch.reader_url)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


def _state(scratch: PgScratch) -> tuple[object, ...]:
    """What the database holds, and what the reader still has running."""
    with psycopg.connect(scratch.admin_url, autocommit=True) as c:
        data = c.execute("SELECT md5(string_agg(t::text, '|' ORDER BY id)) FROM docs t").fetchone()
        relations = c.execute(
            "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        ).fetchone()
        running = c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND state = 'active'", [scratch.reader]
        ).fetchone()
    return data, relations, running


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_postgres_uninterruptible_work_is_resource_before_the_timeout(
    name: str, service: SqlService, scratch: PgScratch
) -> None:
    before = _state(scratch)
    started = time.monotonic()
    # Unbounded, this is a QueryTimeout at the deadline plus the grace, and the backend runs on.
    with pytest.raises(QueryFailed) as info:
        service.query(BREAKS[name], call_id="pg-bound")
    took = time.monotonic() - started
    assert (info.value.kind, info.value.message) == ("resource", SEARCH_TOO_LARGE)
    assert took < TIMEOUT_S  # the database refused before computing anything
    assert _state(scratch) == before  # same data, same relations, nothing of the reader's still running
    result, _ = service.query("SELECT 1 AS alive", call_id="after")
    assert result.rows == [[1]]


@pytest.mark.postgres
def test_postgres_small_operands_answer_as_unguarded(service: SqlService) -> None:
    sent = service.admit(SMALL, 100).sql
    assert sent.count("mcpkit_search_bound") == 5  # j - k, and the four normalizations and trims
    assert_guarded_answers_alike(service, sent, SMALL, 2, TIMEOUT_S)
