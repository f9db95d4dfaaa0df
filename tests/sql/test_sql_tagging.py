"""A DBA watching live sessions sees the call id, the MCP client and the model (issue 15).

The official client calls execute_query with a slow query through the real server; another
connection watches pg_stat_activity / the MariaDB process list meanwhile. The client's name is
hostile (a comment terminator, a newline, SQL): it arrives sanitised and capped.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest
from mcp.types import Implementation
from sqlalchemy.engine import make_url

from mcpkit import Call, CallNext, Outcome
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.sql.tagging import SessionTag, session_label, tagged
from mcpkit.testing import connect
from tests.sql.sql_support import DbEnv, mysql_admin

HOSTILE = "Evil */ Client\n; DROP TABLE x; -- " + "y" * 200


async def _model(call: Call, call_next: CallNext) -> Outcome:
    call.state["model"] = "claude-test */ 4"  # what an operator's middleware would put there
    return await call_next(call)


async def _watch_while_calling(env: DbEnv, query: str, watch: Any) -> tuple[list[Any], str]:
    engine = SqlEngine(env.ro_url)
    try:
        server = build_server(SqlService(engine, timeout_s=30.0), middleware=[_model])
        async with connect(server, client_info=Implementation(name=HOSTILE, version="1")) as client:
            answer: dict[str, Any] = {}

            async def call() -> None:
                answer["result"] = await client.call_tool("execute_query", {"query": query})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                seen = await anyio.to_thread.run_sync(watch)
        result = answer["result"]
        assert not result.is_error, result
        return seen, str((result.meta or {}).get("mcpkit/callId", ""))
    finally:
        engine.close()


@pytest.mark.postgres
@pytest.mark.anyio
async def test_pg_application_name_shows_call_client_and_model(pg_env: DbEnv) -> None:
    admin = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)

    def watch() -> list[Any]:
        with psycopg.connect(admin, autocommit=True) as conn:
            for _ in range(300):
                rows = conn.execute(
                    "SELECT application_name FROM pg_stat_activity WHERE usename = %s AND state = 'active'"
                    " AND query ILIKE %s",
                    [pg_env.ro_user, "%generate_series(1, 40000001)%"],
                ).fetchall()
                if rows:
                    return rows
                time.sleep(0.05)
        return []

    seen, call_id = await _watch_while_calling(
        pg_env, "SELECT count(*) FROM generate_series(1, 40000001)", watch
    )
    assert seen, "the slow query was never seen running"
    label = seen[0][0]
    assert label == f"mcpkit:{call_id[:16]} Evil-Client-DROP-TA claude-test-4", label
    assert len(label) <= 63


@pytest.mark.mysql
@pytest.mark.anyio
async def test_mysql_process_list_shows_call_client_and_model(mysql_env: DbEnv) -> None:
    def watch() -> list[Any]:
        admin = mysql_admin(mysql_env.admin_url)
        try:
            for _ in range(300):
                with admin.cursor() as cur:
                    cur.execute(
                        "SELECT INFO FROM information_schema.PROCESSLIST WHERE USER = %s AND INFO LIKE %s",
                        [mysql_env.ro_user, "%seq_1_to_4001%"],
                    )
                    rows = list(cur.fetchall())
                if rows:
                    return rows
                time.sleep(0.05)
        finally:
            admin.close()
        return []

    seen, call_id = await _watch_while_calling(
        mysql_env, "SELECT SUM(a.seq * b.seq) AS s FROM seq_1_to_4001 a CROSS JOIN seq_1_to_4001 b", watch
    )
    assert seen, "the slow query was never seen running"
    info = seen[0][0]
    client = "Evil-Client-DROP-TABLE-x-" + "y" * 15  # 40 characters at most
    assert info.startswith(f"/* mcpkit:{call_id} client={client} model=claude-test-4 */ "), info
    assert info.count("*/") == 1 and "\n" not in info


def test_labels_are_sanitised_and_capped() -> None:
    with tagged(SessionTag.of("abc", HOSTILE, "m*/\n")):
        full, compact = session_label("abc"), session_label("abc", limit=63, compact=True)
    assert full == "mcpkit:abc client=Evil-Client-DROP-TABLE-x-yyyyyyyyyyyyyyy model=m"
    assert compact == "mcpkit:abc Evil-Client-DROP-TA m"
    assert session_label("abc") == "mcpkit:abc"  # outside the call, the id alone
    with tagged(SessionTag.of("other", "c")):
        assert session_label("abc") == "mcpkit:abc"  # a tag of another call is not used
