"""What a pooled PostgreSQL call sends, counted at the driver (libpq's protocol trace), and the
remembered result descriptions that let the clipping's describe travel with the query (issue 15).

A round trip is one wait for the server's ReadyForQuery. Before this change a clean call took 5
(BEGIN + settings, the clipping's describe, the query, ROLLBACK, DISCARD ALL); now a repeated
statement takes 2 (the begin, the describe and the query in one pipeline; the rollback and the
reset in one message) and the first call of a statement 3. A remembered description is used only when the same
call's own describe matches it, so changing the table between two identical calls (a type, a name,
a column fewer) must give the answer a first call would give.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg import pq
from sqlalchemy import event

from mcpkit.sql.clipping import BinarySize, CellBudget, text_chars
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.identities import RoleEngine
from tests.sql.sql_support import DbEnv, pg_admin

pytestmark = pytest.mark.postgres


class Trace:
    """libpq's trace of every connection the engine checks out, read back as messages."""

    def __init__(self, engine: SqlEngine) -> None:
        self._file = tempfile.TemporaryFile("w+")  # noqa: SIM115 (read back until the test ends)
        event.listen(engine.sa_engine, "checkout", self._on)
        event.listen(engine.sa_engine, "checkin", self._off)

    def _on(self, dbapi: Any, record: Any, proxy: Any) -> None:
        dbapi.pgconn.trace(self._file.fileno())
        dbapi.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    def _off(self, dbapi: Any, record: Any) -> None:
        if dbapi is not None:
            dbapi.pgconn.untrace()

    def take(self) -> list[str]:
        """The messages since the last `take`, one line each ("F"rontend / "B"ackend)."""
        self._file.flush()
        self._file.seek(0)
        lines = self._file.read().splitlines()
        self._file.seek(0)
        self._file.truncate()
        return lines


def round_trips(lines: list[str]) -> int:
    return sum(1 for line in lines if line.split("\t")[2:3] == ["ReadyForQuery"])


@pytest.fixture
def table(pg_env: DbEnv) -> Iterator[str]:
    name = f"{pg_env.schema}.mk_desc_{secrets.token_hex(4)}"
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, n int, note text, blob bytea)")
        c.execute(f"INSERT INTO {name} VALUES (1, 7, 'short', '\\x0102'), (2, 8, 'two', NULL)")
        c.execute(f"GRANT SELECT ON {name} TO {pg_env.ro_user}")
    try:
        yield name
    finally:
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"DROP TABLE IF EXISTS {name}")


@pytest.fixture
def engine(pg_env: DbEnv) -> Iterator[SqlEngine]:
    engine = SqlEngine(pg_env.ro_url, pool_size=1)
    yield engine
    engine.close()


def _query(engine: SqlEngine, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`execute_query`'s engine call: the admitted SQL (ending in its row cap), cells clipped."""
    rows = engine.execute(sql, None, 5, 10.0, secrets.token_hex(16), clip=CellBudget())
    return [c.name for c in rows.columns], [tuple(r) for r in rows.rows]


def test_a_clean_call_takes_two_round_trips_and_a_first_one_three(engine: SqlEngine, table: str) -> None:
    trace = Trace(engine)
    _query(engine, f"SELECT * FROM {table} WHERE id = 2 LIMIT 6")  # built-in types: looked up once a process
    trace.take()
    sql = f"SELECT * FROM {table} WHERE id = 1 LIMIT 6"
    _query(engine, sql)
    first = trace.take()
    _query(engine, sql)
    again = trace.take()
    assert round_trips(first) == 3, "\n".join(first)
    assert round_trips(again) == 2, "\n".join(again)
    # The begin, the settings, the describe and the query travel in the extended protocol (one
    # statement each), never in a simple-protocol message that could carry a second statement;
    # the only simple-protocol message is the reset, which holds no SQL of the call's.
    parsed = [
        line.split("\t")[3].split('" "', 1)[1].rsplit('"', 1)[0]
        for line in again
        if line.split("\t")[2:3] == ["Parse"]
    ]
    assert parsed[0] == "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY" and parsed[1].startswith(
        "SELECT set_config('statement_timeout'"
    )
    assert parsed[2].endswith("WHERE id = 1 LIMIT 0") and parsed[3].endswith(
        "WHERE id = 1 LIMIT 6) AS q(c0, c1, c2, c3)"
    )
    simple = [line.split("\t")[3].strip() for line in again if line.split("\t")[2:3] == ["Query"]]
    assert len(simple) == 1 and simple[0].startswith('"ROLLBACK; CLOSE ALL;')


def test_a_call_with_the_pool_off_is_not_reset_but_closed(pg_env: DbEnv, table: str) -> None:
    engine = SqlEngine(pg_env.ro_url, pool_size=0)
    try:
        trace = Trace(engine)
        _query(engine, f"SELECT id FROM {table} LIMIT 6")
        lines = trace.take()
        assert not any("CLOSE ALL" in line for line in lines)
    finally:
        engine.close()


def test_a_changed_column_type_is_seen_by_the_next_identical_call(
    pg_env: DbEnv, engine: SqlEngine, table: str
) -> None:
    sql = f"SELECT id, n, blob FROM {table} ORDER BY id LIMIT 6"
    assert _query(engine, sql) == (["id", "n", "blob"], [(1, 7, BinarySize(2)), (2, 8, None)])
    with pg_admin(pg_env.admin_url) as c:  # the fixed-size column becomes text with a huge cell
        c.execute(f"ALTER TABLE {table} ALTER COLUMN n TYPE text")
        c.execute(f"UPDATE {table} SET n = repeat('x', 3000000) WHERE id = 1")
        c.execute(f"ALTER TABLE {table} ALTER COLUMN blob TYPE text USING 'was binary'")
    names, rows = _query(engine, sql)
    assert names == ["id", "n", "blob"]
    assert isinstance(rows[0][1], str) and rows[0][1] == "x" * text_chars(CellBudget().cell_bytes(6, 3))
    assert rows[0][2] == "was binary" and rows[1] == (2, "8", "was binary")


def test_renamed_and_dropped_columns_are_seen_by_the_next_identical_call(
    pg_env: DbEnv, engine: SqlEngine, table: str
) -> None:
    sql = f"SELECT * FROM {table} ORDER BY id LIMIT 6"
    assert _query(engine, sql)[0] == ["id", "n", "note", "blob"]
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"ALTER TABLE {table} RENAME COLUMN note TO remark")
    assert _query(engine, sql) == (
        ["id", "n", "remark", "blob"],
        [(1, 7, "short", BinarySize(2)), (2, 8, "two", None)],
    )
    with pg_admin(pg_env.admin_url) as c:  # fewer columns: the remembered wrap fails in the database
        c.execute(f"ALTER TABLE {table} DROP COLUMN blob, DROP COLUMN n")
    assert _query(engine, sql) == (["id", "remark"], [(1, "short"), (2, "two")])
    assert _query(engine, sql) == (["id", "remark"], [(1, "short"), (2, "two")])


def test_a_role_is_taken_on_before_the_query_and_a_failing_role_fails_the_call(
    pg_env: DbEnv, engine: SqlEngine, table: str
) -> None:
    role = f"mk_rt_role_{secrets.token_hex(4)}"
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"CREATE ROLE {role} NOLOGIN")
        c.execute(f"GRANT {role} TO {pg_env.ro_user}")
    as_role = RoleEngine(engine, role)
    try:
        sql = "SELECT current_user, session_user LIMIT 6"
        for _ in range(2):  # the first call describes, the second uses what it described
            assert _query(as_role, sql)[1] == [(role, pg_env.ro_user)]
        assert _query(engine, sql)[1] == [(pg_env.ro_user, pg_env.ro_user)]
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"REVOKE {role} FROM {pg_env.ro_user}")
        for _ in range(2):  # never run as the login instead
            with pytest.raises(QueryFailed):
                _query(as_role, sql)
    finally:
        as_role.close()
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"DROP ROLE {role}")


def test_a_pooled_connection_found_gone_is_replaced_for_the_same_call(
    pg_env: DbEnv, engine: SqlEngine, table: str
) -> None:
    sql = "SELECT pg_backend_pid() LIMIT 6"
    pid = _query(engine, sql)[1][0][0]
    with pg_admin(pg_env.admin_url) as c:
        c.execute("SELECT pg_terminate_backend(%s)", [pid])
    time.sleep(0.2)
    fresh = _query(engine, sql)[1][0][0]
    assert isinstance(fresh, int) and fresh != pid


def test_a_timed_out_clipped_call_leaves_its_connection_unused(pg_env: DbEnv, engine: SqlEngine) -> None:
    sql = "SELECT pg_backend_pid() LIMIT 6"
    pid = _query(engine, sql)[1][0][0]
    with pytest.raises(QueryTimeout):
        engine.execute("SELECT pg_sleep(5) LIMIT 2", None, 1, 0.3, "slow", clip=CellBudget())
    assert _query(engine, sql)[1][0][0] != pid


def test_a_user_type_is_looked_up_again_in_the_same_round_trip(
    pg_env: DbEnv, engine: SqlEngine, table: str
) -> None:
    kind = f"{pg_env.schema}.mk_kind_{secrets.token_hex(4)}"
    with pg_admin(pg_env.admin_url) as c:
        c.execute(f"CREATE TYPE {kind} AS ENUM ('small', 'large')")
        c.execute(f"ALTER TABLE {table} ADD COLUMN size {kind} DEFAULT 'small'")
    try:
        trace, sql = Trace(engine), f"SELECT id, size FROM {table} ORDER BY id LIMIT 6"
        first = engine.execute(sql, None, 5, 10.0, "first", clip=CellBudget())
        trace.take()
        again = engine.execute(sql, None, 5, 10.0, "again", clip=CellBudget())
        assert round_trips(trace.take()) == 2
        assert again.rows == first.rows == ((1, "small"), (2, "small"))
        assert [c.type_name for c in again.columns] == ["int4", kind.rsplit(".", 1)[1]]
        with pg_admin(pg_env.admin_url) as c:  # the same OID under another name
            c.execute(f"ALTER TYPE {kind} RENAME TO mk_renamed_{kind.rsplit('_', 1)[1]}")
        renamed = engine.execute(sql, None, 5, 10.0, "renamed", clip=CellBudget())
        assert [c.type_name for c in renamed.columns] == ["int4", f"mk_renamed_{kind.rsplit('_', 1)[1]}"]
    finally:
        with pg_admin(pg_env.admin_url) as c:
            c.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS size")
            c.execute(f"DROP TYPE IF EXISTS {kind}")
            c.execute(f"DROP TYPE IF EXISTS {pg_env.schema}.mk_renamed_{kind.rsplit('_', 1)[1]}")
