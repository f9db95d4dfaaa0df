"""PostgreSQL: calls that sort and dedupe an object's keys with no interrupt check are bounded before
the sort (issue 10), as a cast to jsonb or hstore is (`test_sql_pg_casts.py`).

jsonb_object_agg sorts in its final function, which no guard can precede: 3M keys ran 6.9 s past a
2 s timeout and took the backend to 1.2 GB. It is sent as json_object_agg(...)::jsonb, the same
jsonb, whose sort runs in a cast guarded by the object's text (2 MB). hstore(text[], text[])
and jsonb_object(text[], text[]) are guarded on their arguments (two arrays of 3M keys: 8 s past a
1 s timeout, 2.7 GB).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import PgScratch, assert_guarded_answers_alike, pg_need_extensions, pg_scratch

TIMEOUT_S = 10.0
SEARCH_TOO_LARGE = "The query searches strings too large to search within the time limit; narrow it."
VALUE_TOO_LARGE = (
    "The query would build a value larger than this server allows (a JSON function, repeat, pad,"
    " replace, a split, a regular expression or a long concatenation over large values); apply it to"
    " smaller values."
)
KEYS = "(SELECT array_agg('k' || g) AS k, array_agg(g::text) AS v FROM generate_series(1, 300000) g) AS a"


@pytest.fixture(scope="module")
def scratch(pg_url: str) -> Iterator[PgScratch]:
    """A reader with hstore, on `kv`: 300,000 keys and values."""
    with pg_scratch(pg_url, "keys") as s:
        pg_need_extensions(s.admin, "hstore")
        s.admin.execute("CREATE EXTENSION hstore")
        s.admin.execute(
            "CREATE TABLE kv AS SELECT 'k' || g AS k, g AS v, g % 3 AS grp FROM generate_series(1, 300000) g"
        )
        s.admin.execute(f"GRANT SELECT ON kv TO {s.reader}")
        yield s


@pytest.fixture
def service(scratch: PgScratch) -> Iterator[SqlService]:
    engine = SqlEngine(scratch.reader_url)
    policy = FunctionPolicy.for_dialect("postgres", extra=["hstore", "akeys", "public.hstore"])
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S, functions=policy)
    finally:
        engine.close()


CASES = {
    "jsonb_object_agg": ("SELECT length(jsonb_object_agg(k, v)::text) AS n FROM kv", SEARCH_TOO_LARGE),
    "jsonb_object_agg FILTER": (
        "SELECT length((jsonb_object_agg(k, v) FILTER (WHERE v > 10))::text) AS n FROM kv",
        SEARCH_TOO_LARGE,
    ),
    "jsonb_object of two arrays": (
        f"SELECT length(jsonb_object(k, v)::text) AS n FROM {KEYS}",
        VALUE_TOO_LARGE,
    ),
    "hstore of two arrays": (f"SELECT cardinality(akeys(hstore(k, v))) AS n FROM {KEYS}", VALUE_TOO_LARGE),
    # hstore sits in its extension's schema: guarded whatever schema it is written in, the whole call
    "public.hstore": (f"SELECT cardinality(akeys(public.hstore(k, v))) AS n FROM {KEYS}", VALUE_TOO_LARGE),
}


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(CASES))
def test_postgres_a_large_key_sort_fails_before_it_runs(name: str, service: SqlService) -> None:
    sql, message = CASES[name]
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(sql, call_id="keys")
    assert (info.value.kind, info.value.message) == ("resource", message)
    assert time.monotonic() - started < 5.0


SMALL = {
    "jsonb_object_agg FILTER, a duplicate key keeps the last value": (
        "SELECT grp, jsonb_object_agg(k, v) FILTER (WHERE v < 8) AS j, jsonb_object_agg('same', v)"
        " FILTER (WHERE v < 6) AS last FROM kv WHERE v < 10 GROUP BY grp ORDER BY grp"
    ),
    "jsonb_object_agg of numbers, nulls and dates": (
        "SELECT grp, jsonb_object_agg(k, CASE WHEN v > 5 THEN v::float8 / 7 END) AS f,"
        " jsonb_object_agg(k, DATE '2024-01-01' + v) AS d FROM kv WHERE v < 10 GROUP BY grp ORDER BY grp"
    ),
    "jsonb_object and hstore of a row's arrays": (
        "SELECT v, jsonb_object(ARRAY[k, v::text]) AS o,"
        " jsonb_object(ARRAY[k, 'x'], ARRAY[v::text, k]) AS o2,"
        " hstore(ARRAY[k], ARRAY[v::text])::text AS h FROM kv WHERE v < 4 ORDER BY v"
    ),
}


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(SMALL))
def test_postgres_small_objects_answer_as_unguarded(name: str, service: SqlService) -> None:
    sql = SMALL[name]
    sent = service.admit(sql, 10).sql
    assert "JSONB_OBJECT_AGG" not in sent
    assert "mcpkit_s" in sent
    assert_guarded_answers_alike(service, sent, sql, 3, TIMEOUT_S)
