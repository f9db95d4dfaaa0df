"""Floor: one SQL tool on the official SDK's bare low-level server over stdio (issue 15).

One psycopg AsyncConnection kept open on the event loop (autocommit), the query wrapped in LIMIT 26,
up to 25 rows returned as JSON text plus structuredContent. None of mcpkit's guarantees: no read-only
transaction, no timeouts, no reset, no check of the statement, no masking, no audit. What is left is
what the mandated stack (official Python SDK over stdio, psycopg) costs per call.

    python bench/servers/bare_sql.py postgresql://user@host/db [thread]

With `thread`: a sync psycopg connection, the query run in a worker thread (`anyio.to_thread`), as
mcpkit's engine runs it: the difference is what the two thread hops cost a whole call.
"""

import json
import sys
from typing import Any

import anyio
import mcp_types as types
import psycopg
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

CAP = 25
TOOL = types.Tool(
    name="execute_query",
    description="Run one SQL query; up to 25 rows.",
    input_schema={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
conn: psycopg.AsyncConnection[Any] | None = None
sync_conn: psycopg.Connection[Any] | None = None


async def list_tools(ctx, params):  # type: ignore[no-untyped-def]
    return types.ListToolsResult(tools=[TOOL])


def run_sync(sql: str) -> tuple[list[str], list[Any]]:
    assert sync_conn is not None
    with sync_conn.cursor() as cur:
        cur.execute(f"SELECT * FROM ({sql}) AS q LIMIT {CAP + 1}")
        return [d.name for d in cur.description or ()], cur.fetchall()[:CAP]


async def call_tool(ctx, params):  # type: ignore[no-untyped-def]
    sql = (params.arguments or {}).get("query", "")
    if sync_conn is not None:
        columns, rows = await anyio.to_thread.run_sync(run_sync, sql)
    else:
        assert conn is not None
        async with conn.cursor() as cur:
            await cur.execute(
                f"SELECT * FROM ({sql}) AS q LIMIT {CAP + 1}"
            )  # the cap in the SQL, as peers do
            rows = (await cur.fetchall())[:CAP]
            columns = [d.name for d in cur.description or ()]
    shaped = [[v if isinstance(v, (int, float, str, type(None))) else str(v) for v in row] for row in rows]
    body = {"columns": columns, "rows": shaped}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, separators=(",", ":")))],
        structured_content=body,
    )


server = Server("bare-sql", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(dsn: str, mode: str) -> None:
    global conn, sync_conn
    if mode == "thread":
        sync_conn = psycopg.connect(dsn, autocommit=True)
    else:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "async")
