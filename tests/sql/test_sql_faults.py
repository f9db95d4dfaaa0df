"""Faults: the database goes away mid-run and comes back; a client walks away mid-query."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import httpx2
import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql import SqlEngine, SqlService
from mcpkit.sql.server import build_server
from mcpkit.testing import connect
from tests.conftest import pg_address
from tests.helpers import free_port, python_server, text_of
from tests.sql.sql_support import DbEnv

COUNT = {"query": "SELECT COUNT(*) AS n FROM sales_demo"}


class TcpProxy:
    """A loopback TCP proxy to PostgreSQL that a test can cut (every connection dropped) and restore."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def _run(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)  # type: ignore[arg-type]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)

    async def _stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.transport.abort()  # the "restart": every session dies at once
        self.writers.clear()
        await self.server.wait_closed()

    def start(self) -> None:
        self._run(self._start())

    def stop(self) -> None:
        self._run(self._stop())


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    p = TcpProxy(free_port(), pg_address())
    p.start()
    yield p
    with contextlib.suppress(Exception):
        p.stop()


@pytest.mark.postgres
@pytest.mark.anyio
async def test_database_restart_mid_run_fails_retryable_then_recovers(pg_env: DbEnv, proxy: TcpProxy) -> None:
    url = make_url(pg_env.ro_url).set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    service = SqlService(SqlEngine(url), timeout_s=5)
    server = build_server(service)
    async with connect(server) as client:
        before = await client.call_tool("execute_query", COUNT)
        proxy.stop()
        during = await client.call_tool("execute_query", COUNT)
        proxy.start()
        after = await client.call_tool("execute_query", COUNT)
    service.engine.close()
    assert not before.is_error
    error = (during.meta or {})["mcpkit/error"]
    assert during.is_error
    assert error["retryable"] is True
    assert error["data"]["reason"] == "connection"
    assert str(pg_address()[1]) not in text_of(during)
    assert "psycopg" not in text_of(during)
    assert text_of(after) == text_of(before).replace(
        text_of(before).splitlines()[0], text_of(after).splitlines()[0]
    )


def _sessions_of(pg_env: DbEnv) -> int:
    admin = make_url(pg_env.admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as c:
        row = c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", [pg_env.ro_user]
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
def test_client_disconnecting_mid_query_leaks_no_database_session(pg_env: DbEnv) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = [
        "-m",
        "mcpkit",
        "sql",
        "serve",
        "--dsn",
        pg_env.ro_url,
        "--transport",
        "http",
        "--port",
        str(port),
        "--stateless",
        "--json-response",
        "--timeout",
        "3",
    ]
    slow = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "execute_query",
            "arguments": {"query": "SELECT count(*) AS n FROM generate_series(1, 300000000) AS g"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with python_server(args, port):
        with pytest.raises(httpx2.ReadTimeout):
            httpx2.post(url, headers=headers, json=slow, timeout=0.8)
        deadline = time.monotonic() + 15
        while _sessions_of(pg_env) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _sessions_of(pg_env) == 0
        again = httpx2.post(
            url,
            headers=headers,
            timeout=20,
            json={**slow, "params": {"name": "execute_query", "arguments": COUNT}},
        )
        assert "| n |" in again.json()["result"]["content"][0]["text"]
