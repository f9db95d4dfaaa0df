"""Operators whose function is an expensive search are bounded as the function is (bound_searches).

pg_trgm's operators run its C similarity functions, which check no interrupt: before, `a
OPERATOR(public.<<->) b` over 100 KB ran about 8 s past a 2 s statement timeout (word_similarity over
660 KB: 310 s), and `a % b`, `a <-> b` (sqlglot's modulo and distance) went unguarded. An operator
named `OPERATOR(schema.op)` outside pg_catalog that admission does not know is refused.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import PgScratch, assert_guarded_answers_alike, pg_need_extensions, pg_scratch

TIMEOUT_S = 3.0
MARKER = "mcpkit_search_bound"
# The contract, written out (not imported) so that these tests run, and fail, on code without it.
SEARCH_TOO_LARGE = "The query searches strings too large to search within the time limit; narrow it."
WORDS = "(SELECT string_agg(md5(g::text), ' ') AS s FROM generate_series(1, {n}) g) x"
LARGE = {
    # 100 KB: each ran 8-12 s past a 2 s timeout, unguarded
    "OPERATOR(public.<<->)": f"SELECT s OPERATOR(public.<<->) s AS d FROM {WORDS.format(n=3000)}",
    "OPERATOR(<->>) unqualified": f"SELECT s OPERATOR(<->>) s AS d FROM {WORDS.format(n=3000)}",
    "OPERATOR(public.<%)": f"SELECT s OPERATOR(public.<%) s AS m FROM {WORDS.format(n=3000)}",
    "OPERATOR(public.<<<->)": f"SELECT s OPERATOR(public.<<<->) s AS d FROM {WORDS.format(n=3000)}",
    # similarity's budget (1e11 byte pairs), passed by two 400 KB strings
    "% infix": f"SELECT s % s AS m FROM {WORDS.format(n=12000)}",
    "<-> infix": f"SELECT s <-> s AS d FROM {WORDS.format(n=12000)}",
    "% ANY (ARRAY[...])": f"SELECT s % ANY (ARRAY['x', s]) AS m FROM {WORDS.format(n=12000)}",
    "OPERATOR(public.%)": f"SELECT s OPERATOR(public.%) s AS m FROM {WORDS.format(n=12000)}",
    "a citext column %": "SELECT id FROM docs WHERE id = 0 AND note % note",
    # containment written as an operator (30,000 elements: 5-23 s past a 1 s timeout, unguarded)
    "OPERATOR(pg_catalog.@>)": "SELECT j OPERATOR(pg_catalog.@>) k AS c FROM (SELECT jsonb_agg(g) AS j,"
    " jsonb_agg(g ORDER BY g DESC) AS k FROM generate_series(1, 30000) g) s",
    "a text column <<->": "SELECT body OPERATOR(public.<<->) body AS d FROM docs WHERE id = 0",
}
# Every pg_trgm operator over computed strings, and what `%` and `<->` are on other types.
SMALL = """
SELECT a % b AS m, a <-> b AS d, a OPERATOR(public.<<->) b AS wd, a OPERATOR(public.<->>) b AS wdc,
       a OPERATOR(public.<%) b AS w, a OPERATOR(public.%>) b AS wc, a OPERATOR(public.<<%) b AS sw,
       a OPERATOR(public.%>>) b AS swc, a OPERATOR(public.<<<->) b AS sd, a OPERATOR(public.<->>>) b AS sdc,
       CAST(a AS citext) % b AS cm, i % j AS modulo, n % 2.5 AS nmod, p <-> q AS dist,
       a % ANY (ARRAY[b, 'zz']) AS many, a OPERATOR(public.<%) ANY (ARRAY[b, upper(b)]) AS some
FROM (VALUES ('hello world', 'word', 7, 3, 5.5, point(0, 0), point(3, 4)),
             ('', '', 1, 1, 1, point(1, 1), point(1, 1)),
             ('Grüße, Welt', 'welt', 10, 4, 2, point(0, 1), point(0, 2))) v(a, b, i, j, n, p, q)
ORDER BY a
"""


@pytest.fixture(scope="module")
def scratch(pg_url: str) -> Iterator[PgScratch]:
    """pg_trgm and citext; row 0 of `docs` holds 400 KB of words in `note` and `body`."""
    with pg_scratch(pg_url, "ops") as s:
        pg_need_extensions(s.admin, "pg_trgm", "citext")
        s.admin.execute("CREATE EXTENSION pg_trgm")
        s.admin.execute("CREATE EXTENSION citext")
        s.admin.execute("CREATE TABLE docs (id int PRIMARY KEY, note citext, body text)")
        s.admin.execute(
            "INSERT INTO docs SELECT 0, s, left(s, 100000) FROM"
            " (SELECT string_agg(md5(g::text), ' ') AS s FROM generate_series(1, 12000) g) x"
        )
        s.admin.execute(f"GRANT SELECT ON docs TO {s.reader}")
        yield s


@pytest.fixture
def service(scratch: PgScratch) -> Iterator[SqlService]:
    engine = SqlEngine(scratch.reader_url)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(LARGE))
def test_postgres_trigram_operators_are_resource_before_the_timeout(name: str, service: SqlService) -> None:
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:  # unbounded: a timeout, or an answer
        service.query(LARGE[name], call_id="op-bound")
    assert (info.value.kind, info.value.message) == ("resource", SEARCH_TOO_LARGE)
    assert time.monotonic() - started < TIMEOUT_S
    assert service.query("SELECT 1 AS alive", call_id="after")[0].rows == [[1]]


@pytest.mark.postgres
def test_postgres_small_operator_operands_answer_as_unguarded(service: SqlService) -> None:
    sent = service.admit(SMALL, 100).sql
    assert sent.count(MARKER) >= 11  # every trigram operator, and modulo/distance by their run-time type
    assert_guarded_answers_alike(service, sent, SMALL, 3, TIMEOUT_S)


@pytest.mark.postgres
def test_postgres_every_pg_trgm_operator_is_bounded_as_its_function(scratch: PgScratch) -> None:
    # One place of knowledge: each operator's bound is its function's (similarity_op -> similarity).
    from mcpkit.sql.admission.function_tables.tables import SIZE_BOUNDS

    bounds = SIZE_BOUNDS["postgres"]
    rows = scratch.admin.execute(
        "SELECT o.oprname, o.oprcode::text FROM pg_operator o JOIN pg_depend d ON d.objid = o.oid"
        " AND d.classid = 'pg_operator'::regclass JOIN pg_extension e ON e.oid = d.refobjid"
        " WHERE e.extname = 'pg_trgm'"
    ).fetchall()
    assert len(rows) == 10
    for name, code in rows:
        function = code.removesuffix("_op").removesuffix("_commutator").removesuffix("_dist")
        function = function.removesuffix("_dist") if function != "similarity_dist" else "similarity"
        bound = bounds.operators.get(name)
        assert bound is not None, name
        assert bound.budget == bounds.calls[function].budget, (name, function)


def test_an_unknown_qualified_operator_and_the_unparsed_trigram_forms_are_refused() -> None:
    for sql, refused in (
        ("SELECT a OPERATOR(app.+) b FROM t", "OPERATOR(app.+) is not an operator this server knows"),
        ("SELECT a OPERATOR(Evil.===) b FROM t", "OPERATOR(Evil.===) is not an operator"),
        # sqlglot has no grammar for these: never sent
        ("SELECT a <<-> b FROM t", "syntax error"),
        ("SELECT a %> b FROM t", "syntax error"),
        ("SELECT a <% b FROM t", "Bind parameters"),
    ):
        with pytest.raises(Refused, match=re.escape(refused)):
            admit(sql, "postgres")


def test_built_in_and_vector_operators_stay_as_written() -> None:
    # pg_catalog's own, a distance to a vector or a point (similar_rows' ORDER BY keeps its index)
    for sql in (
        "SELECT a OPERATOR(pg_catalog.+) b FROM t",
        "SELECT e OPERATOR(public.<=>) v FROM t",
        'SELECT t.e OPERATOR("public".<->) CAST((SELECT e FROM t WHERE id = 1) AS "public"."vector") FROM t',
        "SELECT p <-> CAST(q AS point), id % 10 FROM t",
    ):
        assert MARKER not in admit(sql, "postgres").sql, sql
    assert MARKER in admit("SELECT a <-> b FROM t", "postgres").sql  # text (pg_trgm), run-time type tested
