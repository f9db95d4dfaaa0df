"""The audit log: stores (SQLite WAL, PostgreSQL), the background writer, every call of a session
recorded through the official client, SIGTERM right after answering, and `mcpkit audit`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy import create_engine, text

from mcpkit.cli import main as mcpkit_main
from mcpkit.sql.audit import AuditLog, AuditRecord, AuditStore, CallAudit, open_store
from mcpkit.sql.audit_cli import parse_since, render_table
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect
from tests.sql.sql_support import pg_admin
from tests.sql_governance.audited import audited_server
from tests.sql_governance.conftest import CrmDb

ROOT = Path(__file__).resolve().parents[2]


def _rec(i: int, **kw: object) -> AuditRecord:
    base: dict[str, object] = {"call_id": f"c{i}", "tool": "execute_query", "outcome": "OK", "rows": i}
    base.update(kw)
    return AuditRecord(**base)  # type: ignore[arg-type]


def test_sqlite_store_round_trip_in_wal_mode(tmp_path: Path) -> None:
    store = open_store(path=tmp_path / "sub" / "audit.db")
    at = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    store.write([_rec(1, at=at, sql="SELECT 1 LIMIT 26", truncated=False, principal="ann")])
    store.write([_rec(2, outcome="REFUSED", reason="write"), _rec(3)])
    got = store.read()
    assert [r.call_id for r in got] == ["c1", "c2", "c3"]
    assert got[0].at == at and got[0].at.tzinfo == dt.UTC and got[0].principal == "ann"
    assert [r.call_id for r in store.read(outcome="refused")] == ["c2"]
    assert [r.call_id for r in store.read(tail=2)] == ["c2", "c3"]
    assert [r.call_id for r in store.read(since=at + dt.timedelta(minutes=1))] == ["c2", "c3"]
    store.close()
    with sqlite3.connect(tmp_path / "sub" / "audit.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


@pytest.fixture
def pg_audit_dsn(pg_url: str) -> Iterator[str]:
    """A schema of its own for the audit table, reached through search_path."""
    schema = f"mcpkit_audit_{secrets.token_hex(4)}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    yield f"{pg_url}?options=-csearch_path%3D{schema}"
    with pg_admin(pg_url) as c:
        c.execute(f"DROP SCHEMA {schema} CASCADE")


def test_postgres_store_creates_its_table_on_first_use(
    pg_audit_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(dsn=pg_audit_dsn)
    audit = AuditLog(store)
    for i in range(50):
        audit.record(_rec(i))
    assert audit.flush()
    audit.close()
    reader = open_store(dsn=pg_audit_dsn)
    assert [r.rows for r in reader.read(tail=3)] == [47, 48, 49]
    reader.close()
    assert mcpkit_main(["audit", "--audit-dsn", pg_audit_dsn, "--tail", "2", "--format", "json"]) == 0
    assert [json.loads(x)["rows"] for x in capsys.readouterr().out.splitlines()] == [48, 49]


def test_writer_batches_and_close_flushes(tmp_path: Path) -> None:
    audit = AuditLog(open_store(path=tmp_path / "a.db"), batch=100, linger_s=60.0)
    started = time.perf_counter()
    for i in range(1000):
        audit.record(_rec(i))
    per_call_us = (time.perf_counter() - started) / 1000 * 1e6
    assert per_call_us < 200  # the call path only queues
    audit.close()
    assert audit.written == 1000
    audit.close()  # idempotent
    assert len(open_store(path=tmp_path / "a.db").read()) == 1000


def test_records_survive_a_store_outage(pg_url: str) -> None:
    name = f"mcpkit_audit_{secrets.token_hex(4)}"
    dsn = pg_url.rsplit("/", 1)[0] + f"/{name}"
    audit = AuditLog(open_store(dsn=dsn))
    try:
        audit.record(_rec(1))
        assert not audit.flush(timeout_s=2.0)  # the database does not exist yet
        admin = create_engine(
            pg_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as c:
            c.execute(text(f"CREATE DATABASE {name}"))
        audit.record(_rec(2))
        deadline = time.monotonic() + 15
        while audit.written < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert audit.written == 2
    finally:
        audit.close()
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.mark.anyio
async def test_every_call_of_a_session_is_recorded(sqlite_crm: CrmDb, tmp_path: Path) -> None:
    audit = AuditLog(open_store(path=tmp_path / "audit.db"))
    calls = CallAudit(audit)
    calls.attach()
    engine = SqlEngine(sqlite_crm.url)
    try:
        async with connect(audited_server(SqlService(engine, max_rows=50, timeout_s=5.0), calls)) as client:
            ok = await client.call_tool(
                "execute_query", {"query": "SELECT id FROM sales_demo", "max_rows": 3}
            )
            await client.call_tool("execute_query", {"query": "DELETE FROM sales_demo"})
            await client.call_tool("execute_query", {"query": "SELECT 1", "max_rows": "3"})
            await client.call_tool("execute_query", {"query": "SELECT nope FROM sales_demo"})
            await client.call_tool("list_tables", {})
            await client.call_tool("describe_table", {"table": "no_such_table"})
            with pytest.raises(Exception, match="Unknown tool"):
                await client.call_tool("drop_everything", {})
    finally:
        calls.detach()
        audit.close()
        engine.close()
    call_id = (ok.meta or {})["mcpkit/callId"]
    records = open_store(path=tmp_path / "audit.db").read()
    got = [(r.tool, r.outcome, r.reason) for r in records]
    assert got == [
        ("execute_query", "OK", None),
        ("execute_query", "REFUSED", "write"),
        ("execute_query", "INVALID_PARAMS", None),
        ("execute_query", "TOOL_ERROR", "undefined_object"),
        ("list_tables", "OK", None),
        ("describe_table", "REFUSED", "not_found"),
        ("drop_everything", "UNKNOWN_TOOL", None),
    ]
    first = records[0]
    assert first.call_id == call_id and first.sql == "SELECT id FROM sales_demo LIMIT 4"
    assert (first.rows, first.truncated) == (3, True)
    assert first.client_name == "mcp" and first.duration_ms is not None and first.duration_ms > 0
    assert json.loads(first.arguments or "{}") == {"query": "SELECT id FROM sales_demo", "max_rows": 3}
    assert records[1].sql is None  # refused before anything was sent


async def _session(dsn: str, audit: Path, pid_file: Path, signum: int) -> int:
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "tests.sql_governance.audited",
            "--dsn",
            dsn,
            "--audit",
            str(audit),
            "--pid-file",
            str(pid_file),
        ],
        cwd=str(ROOT),
    )
    async with Client(params, mode="legacy") as client:
        for i in range(20):
            await client.call_tool("execute_query", {"query": f"SELECT {i} AS n", "max_rows": 1})
        await client.call_tool("execute_query", {"query": "DROP TABLE sales_demo"})
        pid = int(pid_file.read_text())
        os.kill(pid, signum)  # right after the last answer: every record is still queued
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await anyio.sleep(0.05)
        else:
            raise AssertionError("the server did not stop on the signal")
    return pid


@pytest.mark.anyio
@pytest.mark.parametrize(("signum", "kept"), [(signal.SIGTERM, 21), (signal.SIGKILL, 0)])
async def test_sigterm_after_answering_keeps_every_record(
    sqlite_crm: CrmDb, tmp_path: Path, signum: int, kept: int
) -> None:
    audit = tmp_path / "audit.db"
    await _session(sqlite_crm.url, audit, tmp_path / "pid", signum)
    records = AuditStore(f"sqlite:///{audit}").read() if audit.exists() else []
    assert len(records) == kept  # SIGKILL (no flush possible) shows they were still queued
    if kept:
        assert records[-1].outcome == "REFUSED" and records[0].sql == "SELECT 0 AS n LIMIT 2"


def test_cli_table_json_and_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.db"
    store = open_store(path=path)
    now = dt.datetime.now(dt.UTC)
    store.write(
        [
            _rec(1, at=now - dt.timedelta(hours=3), sql="SELECT  1\n LIMIT 26", principal="ann"),
            _rec(
                2, at=now - dt.timedelta(minutes=5), outcome="REFUSED", reason="write", tool="execute_query"
            ),
            _rec(3, at=now, tool="list_tables", truncated=True),
        ]
    )
    store.close()
    assert mcpkit_main(["audit", "--audit", str(path), "--since", "1h", "--format", "json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["call_id"] for x in lines] == ["c2", "c3"]
    assert mcpkit_main(["audit", "--audit", str(path), "--outcome", "refused"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["at", "call_id", "caller", "tool", "outcome", "rows", "ms", "reason", "sql"]
    assert len(out) == 2 and "REFUSED" in out[1] and "write" in out[1]
    assert mcpkit_main(["audit", "--audit", str(path), "--tool", "list_tables", "--tail", "5"]) == 0
    assert "3+" in capsys.readouterr().out
    assert mcpkit_main(["audit", "--audit", str(tmp_path / "missing.db")]) == 2
    assert mcpkit_main(["audit", "--audit", str(path), "--since", "yesterday"]) == 2
    assert "ISO 8601" in capsys.readouterr().err


def test_render_table_clips_sql() -> None:
    table = render_table([_rec(1, sql="SELECT " + ", ".join(f"c{i}" for i in range(40)), principal="ann")])
    assert table.splitlines()[1].endswith("...") and "ann" in table


def test_parse_since_forms() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert parse_since("90s", now) == now - dt.timedelta(seconds=90)
    assert parse_since("2d", now) == now - dt.timedelta(days=2)
    assert parse_since("2026-01-01T00:00").tzinfo == dt.UTC
