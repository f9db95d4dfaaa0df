"""Issue 10 B1: one call's memory and answer stay bounded whatever the result's width (three engines).

Before: 500 rows x 40 columns of 600 four-byte characters answered 10.1M characters and took 400+ MB
of server memory; 1,600 columns reached 17.6 GB. Now a result wider than `CellBudget.max_columns` is
refused, a wide row fetches fewer rows (a LIMIT in the SQL sent), and the rendered answer stops at a
row boundary under `ANSWER_MAX_CHARS`, saying so.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.clipping import CellBudget
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from mcpkit.sql.shaping import ANSWER_MAX_CHARS
from tests.helpers import ROOT, text_of
from tests.sql.sql_support import DbEnv

ENVS = ["sqlite_env", "pg_env", "mysql_env"]


def wide_sql(dialect: str, columns: int, rows: int = 500, chars: int = 600) -> str:
    """`rows` rows x `columns` columns of `chars` U+1F600 characters, in the engine's dialect."""
    cols = ", ".join(f"x AS x{i}" for i in range(columns))
    if dialect == "postgres":
        cell = f"repeat(chr(128512), {chars})"
        return f"WITH t AS (SELECT {cell} AS x FROM generate_series(1, {rows})) SELECT {cols} FROM t"
    cell = f"REPEAT('\U0001f600', {chars})" if dialect == "mysql" else f"printf('%.{chars}c', char(128512))"
    return (
        f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {rows}), "
        f"t AS (SELECT {cell} AS x FROM g) SELECT {cols} FROM t"
    )


@pytest.fixture(params=ENVS)
def env(request: pytest.FixtureRequest) -> DbEnv:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def test_a_wide_answer_stops_at_a_row_boundary_under_the_cap_and_says_so(env: DbEnv) -> None:
    service = SqlService(SqlEngine(env.ro_url), max_rows=500)
    try:
        result, text = service.query(wide_sql(env.dialect, 40), call_id="wide", max_rows=500)
    finally:
        service.engine.close()
    assert len(text) <= ANSWER_MAX_CHARS + 1000
    assert len(json.dumps(result.rows, ensure_ascii=False)) <= ANSWER_MAX_CHARS
    assert 0 < result.row_count < 500 and result.truncated
    assert all(len(row) == 40 for row in result.rows)  # whole rows only
    assert result.notice and "stopped after" in result.notice
    assert text.splitlines()[0].startswith(
        f"{result.row_count} rows sent; more rows exist; the answer stopped"
    )


def test_a_result_wider_than_the_limit_is_refused_before_it_runs(env: DbEnv) -> None:
    service = SqlService(SqlEngine(env.ro_url), max_rows=500)
    try:
        with pytest.raises(Refused) as refused:
            service.query(wide_sql(env.dialect, 101, rows=2, chars=1), call_id="too-wide", max_rows=500)
        assert (refused.value.data or {})["reason"] == "too_wide"
        assert "101 columns" in str(refused.value) and "limit of 100" in str(refused.value)
        ok, _ = service.query(wide_sql(env.dialect, 100, rows=2, chars=1), call_id="widest", max_rows=5)
        assert len(ok.columns) == 100 and ok.row_count == 2  # the connection still serves
    finally:
        service.engine.close()


def test_a_wide_row_fetches_fewer_rows_in_the_sql_sent_and_says_more_exist(env: DbEnv) -> None:
    budget = CellBudget(call_bytes=256 * 10 * 50)  # 50 rows of 10 cells at the 256-byte floor
    service = SqlService(SqlEngine(env.ro_url), max_rows=500, cells=budget)
    try:
        result, text = service.query(
            wide_sql(env.dialect, 10, rows=300, chars=3), call_id="fit", max_rows=500
        )
        small, _ = service.query(wide_sql(env.dialect, 10, rows=20, chars=3), call_id="fits", max_rows=500)
    finally:
        service.engine.close()
    assert result.row_count == 49 and result.truncated
    assert result.notice and "each row is wide" in result.notice and "each row is wide" in text
    assert small.row_count == 20 and not small.truncated and small.notice is None  # all fit: no notice


_CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a runaway fails here, not on the host
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
def kb(key):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
service = SqlService(SqlEngine(sys.argv[1]), max_rows=500)
service.query("SELECT 1 AS one", call_id="warm", max_rows=1)
open("/proc/self/clear_refs", "w").write("5")
before = kb("VmRSS:")
result, text = service.query(sys.argv[2], call_id="wide", max_rows=500)
print(json.dumps({"mb": (kb("VmHWM:") - before) / 1024, "chars": len(text)}))
"""


def test_peak_memory_of_the_widest_allowed_call_stays_under_64_mb(env: DbEnv) -> None:
    sql = wide_sql(env.dialect, 100)  # the widest result served, 500 rows of 600 four-byte chars
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, env.ro_url, sql],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["mb"] < 64, measured
    assert measured["chars"] <= ANSWER_MAX_CHARS + 1000


@pytest.mark.anyio
async def test_the_sdk_client_gets_a_bounded_answer_and_the_next_call_is_not_held_up(
    sqlite_env: DbEnv,
) -> None:
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", sqlite_env.ro_url, "--no-audit"]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        wide = await client.call_tool("execute_query", {"query": wide_sql("sqlite", 40), "max_rows": 500})
        after = await client.call_tool("execute_query", {"query": "SELECT 1 AS one"})
    text = text_of(wide)
    assert not wide.is_error and len(text) <= ANSWER_MAX_CHARS + 1000
    structured = wide.structured_content or {}
    assert len(json.dumps(structured, ensure_ascii=False)) <= ANSWER_MAX_CHARS + 5000
    assert structured["truncated"] is True and "stopped after" in structured["notice"]
    assert "| 1 |" in text_of(after)


_COMPRESSED_CHILD = """
import json, resource, sys
import psycopg
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
def kb(key):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
url, admin, sql, rows, between = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
service = SqlService(SqlEngine(url), max_rows=500)
service.query(sql, call_id="first", max_rows=rows)  # remembered: the next call's wrap is checked
if between:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(between)
open("/proc/self/clear_refs", "w").write("5")
before = kb("VmRSS:")
result, text = service.query(sql, call_id="big", max_rows=rows)
widest = max(len(str(cell)) for row in result.rows for cell in row)
print(json.dumps({"mb": (kb("VmHWM:") - before) / 1024, "chars": len(text), "widest": widest,
                  "rows": result.row_count}))
"""


def _compressed_call(pg_env: DbEnv, sql: str, rows: int, between: str = "") -> dict[str, float]:
    admin = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "-c", _COMPRESSED_CHILD, pg_env.ro_url, admin, sql, str(rows), between],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def compressible(pg_env: DbEnv) -> Iterator[tuple[str, str]]:
    """60 rows of 1 MB jsonb, json, text[] and text, each stored compressed in a few KB."""
    table = f"{pg_env.schema}.mk_compress_{secrets.token_hex(4)}"
    admin = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"CREATE TABLE {table} (id int, j jsonb, js json, a text[], t text, n int)")
        c.execute(
            f"INSERT INTO {table} SELECT g, jsonb_build_object('log', repeat('x', 1000000)), "
            "json_build_object('log', repeat('y', 1000000)), ARRAY[repeat('z', 1000000)], "
            "repeat('w', 1000000), g FROM generate_series(1, 60) g"
        )
        c.execute(f"GRANT SELECT ON {table} TO {pg_env.ro_user}")
        stored = c.execute(f"SELECT max(pg_column_size(j)), max(pg_column_size(a)) FROM {table}").fetchone()
        assert stored is not None and max(stored) < 40_000  # compressed: the old measure let them through
    try:
        yield table, admin
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {table}")


def test_compressed_json_arrays_and_composites_are_clipped_by_their_real_size(
    pg_env: DbEnv, compressible: tuple[str, str]
) -> None:
    """Red team 10c: `pg_column_size` is the compressed size; 300 such jsonb rows took 724 MB."""
    table, _ = compressible
    measured = _compressed_call(pg_env, f"SELECT id, j, js, a, row(id, t) AS r FROM {table}", 60)
    assert measured["rows"] == 60, measured
    assert measured["mb"] < 64, measured
    assert measured["widest"] < 100_000, measured  # each 1 MB cell came back clipped


def test_a_remembered_fixed_column_that_became_compressible_text_stays_bounded(
    pg_env: DbEnv, compressible: tuple[str, str]
) -> None:
    """The checked pipeline's guard on a remembered fixed-size column measures text, not storage."""
    table, _ = compressible
    # 2 MB a cell, stored in about 23 KB: under the old guard's 32,767 stored bytes (118 MB then).
    change = f"ALTER TABLE {table} ALTER COLUMN n TYPE text USING t || t"
    measured = _compressed_call(pg_env, f"SELECT id, n FROM {table}", 60, change)
    assert measured["rows"] == 60, measured
    assert measured["mb"] < 64, measured
    assert measured["widest"] < 100_000, measured
