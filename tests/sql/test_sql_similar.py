"""similar_rows through the official MCP client, on real engines: SQLite with sqlite-vec, PostgreSQL with
float arrays (and pgvector where the extension is installed).

Neighbours are checked against a brute-force computation in Python; the rules of execute_query (masking,
column grants, row-level security, audit, row caps) are checked to hold for it too.
"""

from __future__ import annotations

import json
import math
import os
import random
import secrets
import sqlite3
import struct
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.engine import make_url

from mcpkit.sql.assemble import enforce_masks
from mcpkit.sql.audit import open_store
from mcpkit.sql.engines.engine import DEFAULT_POOL_SIZE, SqlEngine
from mcpkit.sql.errors import QueryFailed, SqlConfigError
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.models import QueryResult
from mcpkit.sql.profiles import GenericProfile, SqliteProfile
from mcpkit.sql.server import build_server
from mcpkit.sql.service import Masking, SqlService
from mcpkit.sql.similar import enable_similarity
from mcpkit.testing import connect
from tests.helpers import ROOT, free_port, python_server, text_of
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin, pg_admin, pg_drop_schema_and_roles

pytestmark = pytest.mark.anyio

DIM = 24
ROWS = 60
_rng = random.Random(20261203)
VECTORS = [[round(_rng.gauss(0.0, 1.0), 4) for _ in range(DIM)] for _ in range(ROWS)]
REGIONS = ["emea" if i % 2 else "amer" for i in range(1, ROWS + 1)]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1.0 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def l2(a: Sequence[float], b: Sequence[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))


def brute(query: Sequence[float], metric: str, k: int, skip: int | None = None, only: set[int] | None = None):
    """The k nearest ids (1-based) and distances, computed here in Python."""
    measure = cosine if metric == "cosine" else l2
    ranked = sorted(
        (measure(v, query), i)
        for i, v in enumerate(VECTORS, start=1)
        if i != skip and (only is None or i in only)
    )
    return [(i, d) for d, i in ranked[:k]]


def _ranked(result: Any) -> list[tuple[int, float]]:
    assert not result.is_error, text_of(result)
    found = QueryResult.model_validate(result.structured_content)
    assert found.columns[-1] == "distance"
    return [(int(r[0]), float(r[-1])) for r in found.rows]  # type: ignore[arg-type]


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]], tol: float) -> None:
    assert [i for i, _ in got] == [i for i, _ in want]
    for (_, d1), (_, d2) in zip(got, want, strict=True):
        assert abs(d1 - d2) < tol, (got, want)


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error
    error: dict[str, Any] = (result.meta or {})["mcpkit/error"]
    return error


# --- SQLite with sqlite-vec ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def vec_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("similar") / "vectors.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL, region TEXT NOT NULL, "
            "emb TEXT, emb_blob BLOB, private_emb TEXT, note TEXT)"
        )
        for i, v in enumerate(VECTORS, start=1):
            db.execute(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    i,
                    f"item {i}",
                    REGIONS[i - 1],
                    json.dumps(v),
                    struct.pack(f"{DIM}f", *v),
                    json.dumps(v),
                    "x",
                ],
            )
        db.execute("INSERT INTO items (id, label, region) VALUES (1000, 'no vector', 'emea')")
    db.close()
    return path


@pytest.fixture
def sqlite_service(vec_db: Path) -> Iterator[SqlService]:
    engine = SqlEngine(f"sqlite:///{vec_db}")
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    yield service
    engine.close()


def test_an_engine_whose_profile_knows_no_vectors_is_refused_at_start_up(vec_db: Path) -> None:
    engine = SqlEngine(f"sqlite:///{vec_db}")
    engine.profile = GenericProfile("sqlite")  # a backend without `vector_kind`
    try:
        with pytest.raises(SqlConfigError, match="can rank rows by similarity"):
            enable_similarity(SqlService(engine))
    finally:
        engine.close()


@pytest.mark.parametrize("column", ["emb", "emb_blob"])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
async def test_sqlite_neighbours_are_the_brute_force_ones(
    sqlite_service: SqlService, column: str, metric: str
) -> None:
    query = [round(_rng.gauss(0.0, 1.0), 3) for _ in range(DIM)]
    async with connect(build_server(sqlite_service, similar=True)) as client:
        by_row = await client.call_tool(
            "similar_rows", {"table": "items", "column": column, "row_id": 7, "k": 8, "metric": metric}
        )
        by_vector = await client.call_tool(
            "similar_rows", {"table": "items", "column": column, "vector": query, "k": 5, "metric": metric}
        )
    # sqlite-vec computes in float32
    _same(_ranked(by_row), brute(VECTORS[6], metric, 8, skip=7), 1e-4)
    _same(_ranked(by_vector), brute(query, metric, 5), 1e-4)
    text = text_of(by_row)
    assert text.startswith(f'8 nearest rows to row "7" by {metric} distance')
    cells = [c for r in QueryResult.model_validate(by_row.structured_content).rows for c in r]
    assert f"<VECTOR({DIM})>" in text and not any(
        isinstance(c, list) or str(c).startswith("[") for c in cells
    )


async def test_sqlite_vectors_are_shaped_in_execute_query_too(sqlite_service: SqlService) -> None:
    async with connect(build_server(sqlite_service, similar=True)) as client:
        result = await client.call_tool(
            "execute_query", {"query": "SELECT emb, emb_blob FROM items WHERE id = 3"}
        )
        similar = await client.call_tool(
            "similar_rows", {"table": "items", "column": "emb_blob", "row_id": 3, "k": 2}
        )
    rows = QueryResult.model_validate(result.structured_content).rows
    assert rows == [[f"<VECTOR({DIM})>", f"<binary {DIM * 4} bytes>"]]
    found = QueryResult.model_validate(similar.structured_content)
    assert found.columns[:7] == ["id", "label", "region", "emb", "emb_blob", "private_emb", "note"]
    assert {r[3] for r in found.rows} == {f"<VECTOR({DIM})>"}  # another vector column: shaped
    assert {r[4] for r in found.rows} == {f"<VECTOR({DIM})>"}  # the ranked column: shaped in SQL
    assert json.dumps(VECTORS[2])[:12] not in text_of(result) + text_of(similar)


async def test_k_is_capped_and_rows_without_vectors_are_skipped(vec_db: Path) -> None:
    engine = SqlEngine(f"sqlite:///{vec_db}")
    service = SqlService(engine, max_rows=4, timeout_s=10.0)
    enable_similarity(service)
    try:
        async with connect(build_server(service, similar=True)) as client:
            capped = await client.call_tool(
                "similar_rows", {"table": "items", "column": "emb", "row_id": 1, "k": 50}
            )
            too_many = await client.call_tool(
                "similar_rows", {"table": "items", "column": "emb", "row_id": 1, "k": 101}
            )
            none = await client.call_tool(
                "similar_rows", {"table": "items", "column": "emb", "row_id": 1000, "k": 3}
            )
    finally:
        engine.close()
    _same(_ranked(capped), brute(VECTORS[0], "cosine", 4, skip=1), 1e-4)
    assert QueryResult.model_validate(capped.structured_content).truncated
    assert _error(too_many)["code"] == "INVALID_PARAMS"
    assert _ranked(none) == [] and "no readable row has that id" in text_of(none)


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"table": "items", "column": "nope", "row_id": 1}, "not_found"),
        ({"table": "nope", "column": "emb", "row_id": 1}, "not_found"),
        ({"table": "items", "column": "emb", "row_id": 1, "vector": [1.0]}, None),
        ({"table": "items", "column": "emb"}, None),
        ({"table": "items", "column": "emb", "vector": [1.0, float("nan")]}, None),
        ({"table": "items", "column": "emb", "row_id": 1, "metric": "dot"}, None),
    ],
)
async def test_bad_requests_get_a_clear_refusal(
    sqlite_service: SqlService, arguments: dict[str, Any], reason: str | None
) -> None:
    async with connect(build_server(sqlite_service, similar=True)) as client:
        result = await client.call_tool("similar_rows", arguments)
    error = _error(result)
    if reason is None:
        assert error["code"] == "INVALID_PARAMS"
    else:
        assert error["code"] == "REFUSED" and error["data"]["reason"] == reason
    assert "Traceback" not in text_of(result) and "sqlite" not in text_of(result).lower()


async def test_a_vector_of_another_dimension_matches_nothing(sqlite_service: SqlService) -> None:
    async with connect(build_server(sqlite_service, similar=True)) as client:
        result = await client.call_tool(
            "similar_rows", {"table": "items", "column": "emb", "vector": [1.0, 2.0]}
        )
    assert _ranked(result) == []


async def test_names_and_ids_are_quoted_not_spliced(tmp_path: Path) -> None:
    path = tmp_path / "weird.db"
    with sqlite3.connect(path) as db:
        db.execute('CREATE TABLE "we""ird t" ("k""ey" TEXT PRIMARY KEY, "e m""b" TEXT, distance TEXT)')
        for i in range(5):
            db.execute(
                'INSERT INTO "we""ird t" VALUES (?, ?, ?)', [f"a'{i}\\", json.dumps([i, 1.0, 2.0]), "d"]
            )
    db.close()
    engine = SqlEngine(f"sqlite:///{path}")
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    where = {"table": 'we"ird t', "column": 'e m"b', "k": 2}
    try:
        async with connect(build_server(service, similar=True)) as client:
            quoted = await client.call_tool("similar_rows", {**where, "row_id": "a'1\\"})
            spliced = await client.call_tool("similar_rows", {**where, "row_id": "x' OR 1=1 OR 'a'='"})
    finally:
        engine.close()
    found = QueryResult.model_validate(quoted.structured_content)
    assert found.columns == ['k"ey', 'e m"b', "distance", "similarity_distance"]  # the table's own distance
    assert [r[0] for r in found.rows] == ["a'2\\", "a'0\\"]
    assert QueryResult.model_validate(spliced.structured_content).rows == []


def test_loading_sqlite_vec_opens_no_door_to_extensions(sqlite_service: SqlService) -> None:
    # Past admission (which refuses load_extension by name), the authorizer and SQLite itself.
    with pytest.raises(QueryFailed):
        sqlite_service.engine.execute("SELECT load_extension('/nonexistent')", None, 1, 5.0, "t")
    with sqlite_service.engine.session(5.0, "t") as (_, dbapi):
        dbapi.set_authorizer(None)
        with pytest.raises(sqlite3.OperationalError, match="not authorized"):
            dbapi.execute("SELECT load_extension('/nonexistent')")
    rows = sqlite_service.engine.execute("SELECT vec_length('[1, 2, 3]')", None, 1, 5.0, "t").rows
    assert rows == ((3,),)


def test_a_connection_opened_before_similar_gets_the_extension_at_its_next_call(vec_db: Path) -> None:
    # What a connection pool does: the connection outlives the switch.
    profile = SqliteProfile()
    dbapi = profile.engine_options(make_url(f"sqlite:///{vec_db}"))["creator"]()
    try:
        profile.use_vectors()
        profile.begin(dbapi, 5.0, "t")
        assert dbapi.execute("SELECT vec_length('[1, 2]')").fetchone() == (2,)
        profile.end(dbapi)
        profile.begin(dbapi, 5.0, "t")  # loaded once: the second call finds it
        profile.end(dbapi)
    finally:
        dbapi.close()


def test_without_similar_the_extension_is_not_loaded(vec_db: Path) -> None:
    engine = SqlEngine(f"sqlite:///{vec_db}")
    try:
        with pytest.raises(QueryFailed):
            engine.execute("SELECT vec_length('[1, 2, 3]')", None, 1, 5.0, "t")
    finally:
        engine.close()


async def test_a_masked_vector_column_is_refused_and_other_masks_hold(vec_db: Path) -> None:
    engine = SqlEngine(f"sqlite:///{vec_db}")
    policy = MaskPolicy.of(["items.private_emb", "items.note"])
    mapping = reflect_schema(engine.sa_engine)
    enforce_masks(engine, policy.masked_tables(mapping))
    service = SqlService(
        engine, max_rows=50, timeout_s=10.0, masking=Masking(policy, KnownSchema(mapping, "sqlite"))
    )
    enable_similarity(service)
    try:
        async with connect(build_server(service, similar=True)) as client:
            masked = await client.call_tool(
                "similar_rows", {"table": "items", "column": "private_emb", "row_id": 2}
            )
            fine = await client.call_tool(
                "similar_rows", {"table": "items", "column": "emb", "row_id": 2, "k": 3}
            )
    finally:
        engine.close()
    assert _error(masked)["data"]["reason"] == "masked_column"
    found = QueryResult.model_validate(fine.structured_content)
    assert {(r[5], r[6]) for r in found.rows} == {("<masked>", "<masked>")}
    _same(_ranked(fine), brute(VECTORS[1], "cosine", 3, skip=2), 1e-4)


async def test_over_stdio_with_the_cli_and_the_audit(vec_db: Path, tmp_path: Path) -> None:
    # With the default pool: start-up's checks open a pooled connection before --similar turns
    # sqlite-vec on, and the calls reuse it (red team, pool break 6: "no such function: vec_length").
    assert DEFAULT_POOL_SIZE > 0
    audit = tmp_path / "audit.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcpkit",
            "sql",
            "serve",
            "--dsn",
            f"sqlite:///{vec_db}",
            "--similar",
            "--audit",
            str(audit),
        ],
        cwd=str(ROOT),
        env=dict(os.environ),
    )
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool(
            "similar_rows", {"table": "items", "column": "emb", "row_id": 11, "k": 4, "metric": "l2"}
        )
        again = await client.call_tool(  # the pooled connection again
            "similar_rows", {"table": "items", "column": "emb", "row_id": 11, "k": 4, "metric": "l2"}
        )
    assert "similar_rows" in names and _ranked(again) == _ranked(result)
    _same(_ranked(result), brute(VECTORS[10], "l2", 4, skip=11), 1e-4)
    store = open_store(path=audit)
    try:
        record, _ = store.read(tool="similar_rows")
    finally:
        store.close()
    assert record.outcome == "OK" and record.rows == 4
    assert record.sql is not None and "vec_distance_l2" in record.sql and "LIMIT 5" in record.sql


@pytest.fixture(scope="module")
def mysql_vectors(mysql_url: str) -> Iterator[str]:
    table = f"mk_sim_{secrets.token_hex(4)}"
    with mysql_admin(mysql_url) as c, c.cursor() as cur:
        cur.execute(
            f"CREATE TABLE test.{table} (id INT PRIMARY KEY, label VARCHAR(20), emb LONGTEXT, emb_json JSON)"
        )
        cur.executemany(
            f"INSERT INTO test.{table} VALUES (%s, %s, %s, %s)",
            [(i, f"item {i}", json.dumps(v), json.dumps(v)) for i, v in enumerate(VECTORS, start=1)],
        )
        cur.execute(f"INSERT INTO test.{table} (id, label, emb) VALUES (1000, 'not json', 'oops')")
        cur.execute(
            f"CREATE USER '{table}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
        )  # emb_json is not granted: the database withholds it
        cur.execute(f"GRANT SELECT (id, label, emb) ON test.{table} TO '{table}'@'%'")
    yield table
    with mysql_admin(mysql_url) as c, c.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{table}'@'%'")
        cur.execute(f"DROP TABLE IF EXISTS test.{table}")


@pytest.mark.parametrize("column", ["emb", "emb_json"])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
async def test_mariadb_json_arrays_neighbours_are_the_brute_force_ones(
    mysql_url: str, mysql_vectors: str, column: str, metric: str
) -> None:
    engine = SqlEngine(mysql_url)
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    query = [round(_rng.gauss(0.0, 1.0), 3) for _ in range(DIM)]
    where = {"table": mysql_vectors, "column": column, "metric": metric}
    try:
        async with connect(build_server(service, similar=True)) as client:
            by_row = await client.call_tool("similar_rows", {**where, "row_id": 9, "k": 6})
            by_vector = await client.call_tool("similar_rows", {**where, "vector": query, "k": 6})
            text_column = await client.call_tool("similar_rows", {**where, "column": "id", "row_id": 1})
            shown = await client.call_tool(
                "execute_query", {"query": f"SELECT {column} FROM {mysql_vectors} WHERE id = 1"}
            )
    finally:
        engine.close()
    _same(_ranked(by_row), brute(VECTORS[8], metric, 6, skip=9), 1e-9)
    _same(_ranked(by_vector), brute(query, metric, 6), 1e-9)
    assert {r[2] for r in QueryResult.model_validate(by_row.structured_content).rows} == {f"<VECTOR({DIM})>"}
    assert _error(text_column)["data"]["reason"] == "not_a_vector"
    assert QueryResult.model_validate(shown.structured_content).rows == [[f"<VECTOR({DIM})>"]]


async def test_mariadb_column_grants_hold(mysql_url: str, mysql_vectors: str) -> None:
    engine = SqlEngine(make_url(mysql_url).set(username=mysql_vectors).render_as_string(hide_password=False))
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    where = {"table": mysql_vectors, "row_id": 4, "k": 3}
    try:
        async with connect(build_server(service, similar=True)) as client:
            ungranted = await client.call_tool("similar_rows", {**where, "column": "emb_json"})
            granted = await client.call_tool("similar_rows", {**where, "column": "emb"})
    finally:
        engine.close()
    # information_schema does not show the caller a column it holds no privilege on
    assert _error(ungranted)["data"]["reason"] == "not_found"
    assert QueryResult.model_validate(granted.structured_content).columns == [
        "id",
        "label",
        "emb",
        "distance",
    ]
    _same(_ranked(granted), brute(VECTORS[3], "cosine", 3, skip=4), 1e-9)


# --- PostgreSQL: float arrays, pgvector, grants, row-level security -----------------------------


@dataclass(frozen=True)
class PgVectors:
    admin: str
    url: str  # the server's own account (NOINHERIT, member of both roles)
    schema: str
    emea: str
    amer: str


@pytest.fixture(scope="module")
def pg_vectors(pg_url: str) -> Iterator[PgVectors]:
    tag = secrets.token_hex(4)
    s, emea, amer, svc = f"mk_sim_{tag}", f"mk_sim_emea_{tag}", f"mk_sim_amer_{tag}", f"mk_sim_svc_{tag}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {s}")
        for role in (emea, amer):
            c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"CREATE ROLE {svc} LOGIN NOINHERIT")
        c.execute(f"GRANT {emea}, {amer} TO {svc}")
        c.execute(
            f"CREATE TABLE {s}.items (id int PRIMARY KEY, label text NOT NULL, region text NOT NULL, "
            "emb real[], emb8 float8[], secret_emb real[], note text)"
        )
        with c.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {s}.items VALUES (%s, %s, %s, %s, %s, %s, 'x')",
                [(i, f"item {i}", REGIONS[i - 1], v, v, v) for i, v in enumerate(VECTORS, start=1)],
            )
        c.execute(f"INSERT INTO {s}.items (id, label, region) VALUES (1000, 'no vector', 'emea')")
        c.execute(f"CREATE TABLE {s}.big (id int PRIMARY KEY, emb float8[])")
        c.execute(
            # ten times the ranking work of DIM-wide rows: seconds, well past the test's 1 s timeout
            f"INSERT INTO {s}.big SELECT i, ARRAY(SELECT random() FROM generate_series(1, {DIM * 10}) "
            "WHERE i > 0) FROM generate_series(1, 100000) i"
        )
        c.execute(f"ALTER TABLE {s}.items ENABLE ROW LEVEL SECURITY")
        c.execute(f"CREATE POLICY p_emea ON {s}.items FOR SELECT TO {emea} USING (region = 'emea')")
        c.execute(f"CREATE POLICY p_amer ON {s}.items FOR SELECT TO {amer} USING (region = 'amer')")
        c.execute(f"GRANT USAGE ON SCHEMA {s} TO {emea}, {amer}, {svc}")
        # secret_emb is not granted: the database withholds it
        c.execute(f"GRANT SELECT (id, label, region, emb, emb8, note) ON {s}.items TO {emea}, {amer}")
        for role in (svc, emea, amer):
            c.execute(f"ALTER ROLE {role} SET search_path = {s}")
    url = make_url(pg_url).set(username=svc, password=None).render_as_string(hide_password=False)
    yield PgVectors(pg_url, url, s, emea, amer)
    with pg_admin(pg_url) as c:
        pg_drop_schema_and_roles(c, s, [svc, emea, amer])


@pytest.fixture
def pg_admin_service(pg_vectors: PgVectors) -> Iterator[SqlService]:
    engine = SqlEngine(pg_vectors.admin)  # the superuser bypasses RLS: every row, for brute force
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    yield service
    engine.close()


@pytest.mark.parametrize("column", ["emb", "emb8"])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
async def test_pg_float_arrays_neighbours_are_the_brute_force_ones(
    pg_admin_service: SqlService, pg_vectors: PgVectors, column: str, metric: str
) -> None:
    query = [round(_rng.gauss(0.0, 1.0), 3) for _ in range(DIM)]
    where = {"table": "items", "table_schema": pg_vectors.schema, "column": column, "metric": metric}
    async with connect(build_server(pg_admin_service, similar=True)) as client:
        by_row = await client.call_tool("similar_rows", {**where, "row_id": 13, "k": 8})
        by_vector = await client.call_tool("similar_rows", {**where, "vector": query, "k": 6})
        shown = await client.call_tool(
            "execute_query", {"query": f"SELECT {column} FROM {pg_vectors.schema}.items WHERE id = 1"}
        )
    tol = 1e-5 if column == "emb" else 1e-9  # real[] holds float4 values
    _same(_ranked(by_row), brute(VECTORS[12], metric, 8, skip=13), tol)
    _same(_ranked(by_vector), brute(query, metric, 6), tol)
    assert QueryResult.model_validate(shown.structured_content).rows == [[f"<VECTOR({DIM})>"]]
    assert {
        r[3 if column == "emb" else 4] for r in QueryResult.model_validate(by_row.structured_content).rows
    } == {f"<VECTOR({DIM})>"}


async def test_pg_the_statement_timeout_stops_a_long_ranking(pg_vectors: PgVectors) -> None:
    engine = SqlEngine(pg_vectors.admin)
    # 1 s, not less: PostgreSQL also ends a session idle in its transaction that long, and a loaded
    # machine can spend 0.2 s in Python between two statements of one call
    service = SqlService(engine, max_rows=50, timeout_s=1.0)
    enable_similarity(service)
    try:
        async with connect(build_server(service, similar=True)) as client:
            result = await client.call_tool(
                "similar_rows",
                {"table": "big", "table_schema": pg_vectors.schema, "column": "emb", "row_id": 1},
            )
    finally:
        engine.close()
    assert _error(result)["code"] == "TIMEOUT"


async def test_pg_non_vector_and_ungranted_columns_are_refused(pg_vectors: PgVectors) -> None:
    engine = SqlEngine(
        make_url(pg_vectors.admin).set(username=pg_vectors.emea).render_as_string(hide_password=False)
    )
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    where = {"table": "items", "table_schema": pg_vectors.schema, "row_id": 1}
    try:
        async with connect(build_server(service, similar=True)) as client:
            text_column = await client.call_tool("similar_rows", {**where, "column": "label"})
            ungranted = await client.call_tool("similar_rows", {**where, "column": "secret_emb"})
    finally:
        engine.close()
    assert _error(text_column)["data"]["reason"] == "not_a_vector"
    assert _error(ungranted)["code"] == "REFUSED" and _error(ungranted)["data"]["reason"] == "permission"
    assert pg_vectors.schema not in text_of(ungranted)


async def _similar_over_http(url: str, bearer: str, row_id: int) -> object:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool(
            "similar_rows", {"table": "items", "column": "emb8", "row_id": row_id, "k": 50}
        )
    if result.is_error:
        return (result.meta or {})["mcpkit/error"]["code"]
    return [i for i, _ in _ranked(result)]


async def test_pg_row_level_security_holds_for_similarity(pg_vectors: PgVectors, tmp_path: Path) -> None:
    roles, tokens = tmp_path / "roles.yaml", tmp_path / "tokens"
    roles.write_text(
        f"principals:\n  alice: {pg_vectors.emea}\n  bob: {pg_vectors.amer}\n"
        f"logins:\n  {pg_vectors.emea}: {{user: EMEA_USER, password: EMEA_PASSWORD}}\n"
        f"  {pg_vectors.amer}: {{user: AMER_USER, password: AMER_PASSWORD}}\n",
        encoding="utf-8",
    )
    token = {p: f"{p}-token-{secrets.token_hex(12)}" for p in ("alice", "bob")}
    tokens.write_text("".join(f"{p} {t}\n" for p, t in token.items()), encoding="utf-8")
    secrets_env = {
        "EMEA_USER": pg_vectors.emea,
        "EMEA_PASSWORD": "",
        "AMER_USER": pg_vectors.amer,
        "AMER_PASSWORD": "",
    }
    port = free_port()
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", pg_vectors.url, "--role-map", str(roles), "--no-audit"]
    args += ["--similar", "--transport", "http", "--port", str(port), "--tokens", str(tokens)]
    url = f"http://127.0.0.1:{port}/mcp"
    with python_server(args, port, env=secrets_env):
        alice_own = await _similar_over_http(url, token["alice"], 1)  # row 1 is emea
        alice_other = await _similar_over_http(url, token["alice"], 2)  # row 2 is amer: invisible
        bob_own = await _similar_over_http(url, token["bob"], 2)
    emea = {i for i in range(1, ROWS + 1) if REGIONS[i - 1] == "emea"}
    assert alice_own == [i for i, _ in brute(VECTORS[0], "cosine", 50, skip=1, only=emea)]
    assert alice_other == []
    assert bob_own == [
        i for i, _ in brute(VECTORS[1], "cosine", 50, skip=2, only=set(range(1, ROWS + 1)) - emea)
    ]


def _pgvector_available(pg_url: str) -> bool:
    with pg_admin(pg_url) as c:
        return c.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is not None


@pytest.fixture(scope="module")
def pgvector_db(pg_url: str) -> Iterator[str]:
    # pgvector is not in Debian bookworm's archive: this runs where it was built by hand, else skips
    # (an optional extension, not a required service: no failure under CI=true).
    if not _pgvector_available(pg_url):
        pytest.skip("the pgvector extension is not installed on this PostgreSQL")
    name = f"mk_sim_pgvector_{secrets.token_hex(4)}"  # its own database: the extension stays in it
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {name}")
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    try:
        with pg_admin(url) as c:
            c.execute("CREATE EXTENSION vector")
            c.execute(
                f"CREATE TABLE items (id int PRIMARY KEY, label text, emb vector({DIM}), "
                f"hemb halfvec({DIM}), loose vector)"
            )
            with c.cursor() as cur:
                cur.executemany(
                    "INSERT INTO items VALUES (%s, %s, %s::vector, %s::halfvec, %s::vector)",
                    [(i, f"item {i}", str(v), str(v), str(v)) for i, v in enumerate(VECTORS, start=1)],
                )
        yield url
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("column", ["emb", "loose", "hemb"])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
async def test_pgvector_neighbours_are_the_brute_force_ones(
    pgvector_db: str, column: str, metric: str
) -> None:
    engine = SqlEngine(pgvector_db)
    service = SqlService(engine, max_rows=50, timeout_s=10.0)
    enable_similarity(service)
    query = [round(_rng.gauss(0.0, 1.0), 3) for _ in range(DIM)]
    try:
        async with connect(build_server(service, similar=True)) as client:
            by_row = await client.call_tool(
                "similar_rows", {"table": "items", "column": column, "row_id": 5, "k": 7, "metric": metric}
            )
            by_vector = await client.call_tool(
                "similar_rows",
                {"table": "items", "column": column, "vector": query, "k": 7, "metric": metric},
            )
            wrong = await client.call_tool(
                "similar_rows", {"table": "items", "column": column, "vector": [1.0, 2.0]}
            )
            shown = await client.call_tool("execute_query", {"query": f"SELECT {column} FROM items LIMIT 1"})
    finally:
        engine.close()
    tol = 1e-2 if column == "hemb" else 1e-4  # halfvec: 16-bit floats
    if column != "hemb":
        _same(_ranked(by_row), brute(VECTORS[4], metric, 7, skip=5), tol)
        _same(_ranked(by_vector), brute(query, metric, 7), tol)
    else:
        assert len(_ranked(by_row)) == 7 and len(_ranked(by_vector)) == 7
    if column == "loose":
        assert _ranked(wrong) == []
    else:
        assert _error(wrong)["data"]["reason"] == "dimension"
    assert QueryResult.model_validate(shown.structured_content).rows == [[f"<VECTOR({DIM})>"]]
