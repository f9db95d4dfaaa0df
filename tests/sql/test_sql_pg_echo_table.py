"""PostgreSQL: the table of functions whose error quotes an argument whole is what the server says
(red team rt33a F1), and such a call over a large computed text fails before it runs.

`encode('a'::bytea, repeat('x', 60000000))` put the 60 MB format in "unrecognized encoding", which
libpq and psycopg copy several times: the mcpkit process went from 138 MB to 607 MB per call. The
probe (`pg_echo_probe`, about 5 s) calls every allowlisted overload with a marker in each argument a
computed text reaches; a position it finds that `postgres_echoed.ECHOED` lacks fails here, so the
table cannot drift when the allowlist grows.
"""

from __future__ import annotations

import psycopg
import pytest

from mcpkit.sql.admission import admit
from mcpkit.sql.admission.function_tables.postgres import POSTGRES, SIZE_BOUNDS
from mcpkit.sql.admission.function_tables.postgres_echoed import ECHOED
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.pg_echo_probe import overloads, probe
from tests.sql.sql_support import pg_service_fixture, rss_kb

service = pg_service_fixture(10.0)
MARKER = "mcpkit_search_bound"
LARGE = {
    "encode": "SELECT encode('a'::bytea, repeat('x', 60000000)) AS a",
    "pg_size_bytes": "SELECT pg_size_bytes(repeat('x', 60000000)) AS a",
    "decode, qualified": "SELECT pg_catalog.decode('61', repeat('x', 60000000)) AS a",
    "ts_headline options": "SELECT ts_headline('a', to_tsquery('simple', 'a'), repeat('x', 60000000)) AS a",
    "is_normalized": "SELECT is_normalized('a', repeat('x', 60000000)) AS a",
    "at time zone": "SELECT now() AT TIME ZONE repeat('x', 60000000) AS a",
    "jsonb_set path": "SELECT jsonb_set('[1]', ARRAY[repeat('x', 20000000)], '1') AS a",
    "jsonb_path_query datetime": "SELECT jsonb_path_query(jsonb_build_object('k', repeat('x', 10000000)),"
    " '$.k.datetime()') AS a",
    "jsonb_to_record in FROM": "SELECT r.a FROM"
    " jsonb_to_record(jsonb_build_object('a', repeat('x', 10000000))) AS r(a int)",
}


@pytest.mark.postgres
def test_postgres_every_echoing_position_of_the_allowlist_is_in_the_table(pg_url: str) -> None:
    assert SIZE_BOUNDS.echoed_inputs is ECHOED  # the table the admission guard reads
    names = POSTGRES.allowed - SIZE_BOUNDS.function_casts
    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        found = probe(conn, overloads(conn, names))
    missing = {
        name: sorted({p for ps in by.values() for p in ps} - set(ECHOED.get(name, ())))
        for name, by in found.items()
    }
    assert not {n: p for n, p in missing.items() if p}, "run bench/pg_echoed_inputs.py and update ECHOED"
    assert {"encode", "decode", "pg_size_bytes", "to_tsquery", "parse_ident", "ts_headline"} <= set(found)


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(LARGE))
def test_postgres_a_large_echoed_argument_is_refused_before_it_is_quoted(
    name: str, service: SqlService
) -> None:
    before = rss_kb() // 1024
    with pytest.raises(QueryFailed) as info:
        service.query(LARGE[name], call_id="echo")
    assert info.value.kind == "resource", info.value.message  # unguarded: `data`, its input quoted whole
    assert rss_kb() // 1024 - before < 32  # unguarded: several copies of the 60 MB message


@pytest.mark.postgres
def test_postgres_small_echoing_calls_still_answer(service: SqlService) -> None:
    sql = "SELECT encode('a'::bytea, 'hex') AS h, encode('ab'::bytea, lower('HEX')) AS c,"
    sql += " pg_size_bytes('1' || ' kB') AS s, now() AT TIME ZONE lower('UTC') IS NOT NULL AS z"
    assert MARKER in admit(sql, "postgres").sql
    result, _ = service.query(sql, call_id="ok")
    assert list(result.rows[0]) == ["61", "6162", 1024, True]
    with pytest.raises(QueryFailed) as info:
        service.query("SELECT encode('a'::bytea, 'he' || 'z') AS h", call_id="bad")
    assert info.value.kind in ("data", "syntax"), info.value.message  # as before: no guard


@pytest.mark.postgres
def test_postgres_a_json_path_without_datetime_reads_a_large_document(service: SqlService) -> None:
    # only `.datetime()` quotes a string of the target: another literal path is left as written
    doc = "jsonb_build_object('k', repeat('x', 2000000), 'n', 1)"
    sql = f"SELECT jsonb_path_query_first({doc}, '$.n') AS n"
    assert MARKER not in admit(sql, "postgres").sql
    assert service.query(sql, call_id="path")[0].rows[0][0] == 1
    with pytest.raises(QueryFailed) as info:
        service.query(f"SELECT jsonb_path_query_first({doc}, '$.k.datetime()') AS d", call_id="dt")
    assert info.value.kind == "resource", info.value.message
