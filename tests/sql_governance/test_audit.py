"""The audit log: stores (SQLite WAL, PostgreSQL), write-ahead and group commit, fail-closed on an
outage, every call of a session recorded through the official client with its whole statement, a real
`mcpkit sql serve` SIGKILLed right after answering, and `mcpkit audit`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import secrets
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mcpkit.cli import main as mcpkit_main
from mcpkit.sql.audit import AuditLog, AuditStore, CallAudit, open_store
from mcpkit.sql.audit.chain import canonical
from mcpkit.sql.audit_cli import parse_since, render_table
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect
from tests.conftest import PG_URL
from tests.helpers import ROOT, run_mcpkit
from tests.sql_governance.conftest import CrmDb


def call_entries(i: int, at: dt.datetime | None = None, **kw: Any) -> list[dict[str, Any]]:
    """The start and end entries of one call, as `CallAudit` writes them."""
    at = at or dt.datetime.now(dt.UTC)
    start = {
        "v": 1,
        "kind": "start",
        "call_id": f"c{i}",
        "at": at.isoformat(),
        "tool": kw.pop("tool", "execute_query"),
        "principal": kw.pop("principal", None),
        "statement": kw.pop("statement", None),
        "client_name": kw.pop("client_name", None),
    }
    end = {
        "v": 1,
        "kind": "end",
        "call_id": f"c{i}",
        "at": (at + dt.timedelta(milliseconds=5)).isoformat(),
        "tool": start["tool"],
        "outcome": kw.pop("outcome", "OK"),
        "rows": kw.pop("rows", i),
        **kw,
    }
    return [start, end]


def test_sqlite_store_round_trip_in_wal_mode(tmp_path: Path) -> None:
    store = open_store(path=tmp_path / "sub" / "audit.db")
    at = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    store.append(call_entries(1, at, sql="SELECT 1 LIMIT 26", truncated=False, principal="ann"))
    store.append(call_entries(2, outcome="REFUSED", reason="write") + call_entries(3))
    store.append(call_entries(4)[:1])  # started, never ended
    got = store.read()
    assert [r.call_id for r in got] == ["c1", "c2", "c3", "c4"]
    assert got[0].at == at and got[0].at.tzinfo == dt.UTC and got[0].principal == "ann"
    assert [r.seq for r in got] == [1, 3, 5, 7]
    assert [r.call_id for r in store.read(outcome="refused")] == ["c2"]
    assert [r.call_id for r in store.read(outcome="UNFINISHED")] == ["c4"]
    assert [r.call_id for r in store.read(tail=2)] == ["c3", "c4"]
    assert [r.call_id for r in store.read(since=at + dt.timedelta(minutes=1))] == ["c2", "c3", "c4"]
    assert store.head()[0] == 7
    store.close()
    with sqlite3.connect(tmp_path / "sub" / "audit.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


def test_an_old_format_table_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE mcpkit_audit (id INTEGER PRIMARY KEY, call_id TEXT)")
    db.close()
    assert mcpkit_main(["audit", "--audit", str(path)]) == 2
    with pytest.raises(Exception, match="predates the hash-chained format"):
        open_store(path=path).append(call_entries(1))
    served = run_mcpkit("sql", "serve", "--demo", "--audit", str(path), timeout=60)
    assert served.returncode == 2 and "predates the hash-chained format" in served.stderr


def test_the_server_does_not_start_without_its_audit_store() -> None:
    dsn = make_url(PG_URL).set(database=f"mcpkit_absent_{secrets.token_hex(4)}").render_as_string(False)
    served = run_mcpkit("sql", "serve", "--demo", "--audit-dsn", dsn, timeout=60)
    assert served.returncode == 2 and "cannot open the audit store" in served.stderr
    assert "Traceback" not in served.stderr


@pytest.mark.parametrize("sync", ["full", "normal"])
def test_postgres_store_group_commits_concurrent_calls(
    pg_audit_dsn: str, sync: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    audit = AuditLog(open_store(dsn=pg_audit_dsn, sync=sync))

    async def many() -> None:
        await asyncio.gather(*(audit.write(e) for i in range(50) for e in call_entries(i)[:1]))
        await asyncio.gather(*(audit.write(call_entries(i)[1]) for i in range(50)))

    asyncio.run(many())
    assert audit.written == 100 and audit.commits < 100  # calls shared commits
    with audit.store.engine.connect() as c:
        expected = "on" if sync == "full" else "off"
        assert c.execute(text("SHOW synchronous_commit")).scalar() == expected
    audit.close()
    reader = open_store(dsn=pg_audit_dsn)
    assert len(reader.read()) == 50 and all(r.outcome == "OK" for r in reader.read())
    reader.close()
    assert mcpkit_main(["audit", "--audit-dsn", pg_audit_dsn, "--tail", "2", "--format", "json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert mcpkit_main(["audit", "--audit-dsn", pg_audit_dsn, "--verify"]) == 0
    assert "ok: 100 entries, chain intact" in capsys.readouterr().out


@pytest.mark.anyio
async def test_calls_are_refused_while_the_store_is_down(sqlite_crm: CrmDb, pg_url: str) -> None:
    name = f"mcpkit_audit_{secrets.token_hex(4)}"
    dsn = pg_url.rsplit("/", 1)[0] + f"/{name}"
    audit = AuditLog(open_store(dsn=dsn), timeout_s=5.0)
    engine = SqlEngine(sqlite_crm.url)
    admin = create_engine(
        pg_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )
    try:
        server = build_server(SqlService(engine, max_rows=50, timeout_s=5.0), calls=CallAudit(audit))
        async with connect(server) as client:
            down = await client.call_tool("execute_query", {"query": "SELECT 1 AS one"})
            assert down.is_error and "audit log is unavailable" in down.content[0].text  # type: ignore[union-attr]
            assert (down.meta or {})["mcpkit/error"]["retryable"] is True
            with admin.connect() as c:
                c.execute(text(f"CREATE DATABASE {name}"))
            up = await client.call_tool("execute_query", {"query": "SELECT 1 AS one"})
            assert not up.is_error
        records = audit.store.read()
        assert [r.outcome for r in records] == ["OK"]  # the refused call never ran, so it has no record
    finally:
        audit.close()
        engine.close()
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
    "SELECT count(*) AS n FROM c"
)


@pytest.mark.anyio
async def test_an_answer_whose_end_cannot_be_stored_is_withheld(sqlite_crm: CrmDb, pg_url: str) -> None:
    name = f"mcpkit_audit_{secrets.token_hex(4)}"
    admin = create_engine(
        pg_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    audit = AuditLog(open_store(dsn=pg_url.rsplit("/", 1)[0] + f"/{name}"), timeout_s=5.0)
    engine = SqlEngine(sqlite_crm.url)
    try:
        server = build_server(SqlService(engine, max_rows=50, timeout_s=20.0), calls=CallAudit(audit))
        async with connect(server) as client:
            assert not (await client.call_tool("execute_query", {"query": "SELECT 1 AS one"})).is_error
            call = asyncio.ensure_future(client.call_tool("execute_query", {"query": SLOW}))
            while audit.written < 3:  # the slow call's start is stored: it is running now
                await asyncio.sleep(0.01)
            with admin.connect() as c:  # the audit database goes away mid-call
                c.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
            withheld = await call
        assert withheld.is_error and "answer was withheld" in withheld.content[0].text  # type: ignore[union-attr]
        assert "count" not in str(withheld.structured_content or "")
    finally:
        audit.close()
        engine.close()
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


PG_READ_FILE = "/* " + "x" * 1100 + " */ SELECT pg_read_file('/etc/passwd')"


@pytest.mark.anyio
async def test_every_call_of_a_session_is_recorded(sqlite_crm: CrmDb, tmp_path: Path) -> None:
    audit = AuditLog(open_store(path=tmp_path / "audit.db"))
    calls = CallAudit(audit)
    engine = SqlEngine(sqlite_crm.url)
    try:
        server = build_server(SqlService(engine, max_rows=50, timeout_s=5.0), calls=calls)
        async with connect(server) as client:
            ok = await client.call_tool(
                "execute_query", {"query": "SELECT id FROM sales_demo", "max_rows": 3}
            )
            await client.call_tool("execute_query", {"query": "DELETE FROM sales_demo"})
            await client.call_tool("execute_query", {"query": "SELECT 1", "max_rows": "3"})
            await client.call_tool("execute_query", {"query": "SELECT nope FROM sales_demo"})
            await client.call_tool("list_tables", {})
            await client.call_tool("describe_table", {"table": "no_such_table"})
            await client.call_tool("execute_query", {"query": PG_READ_FILE})
            with pytest.raises(Exception, match="Unknown tool"):
                await client.call_tool("drop_everything", {"keyword": "k", "author": "a"})
    finally:
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
        ("execute_query", records[6].outcome, records[6].reason),  # SQLite has no pg_read_file
        ("drop_everything", "UNKNOWN_TOOL", None),
    ]
    first = records[0]
    assert first.call_id == call_id and first.sql == "SELECT id FROM sales_demo LIMIT 4"
    assert (first.rows, first.truncated) == (3, True)
    assert first.client_name == "mcp" and first.duration_ms is not None and first.duration_ms > 0
    assert json.loads(first.arguments or "{}") == {"query": "SELECT id FROM sales_demo", "max_rows": 3}
    assert first.statement == "SELECT id FROM sales_demo" and first.statement_chars == 25
    assert records[1].sql is None and records[1].statement == "DELETE FROM sales_demo"
    refused = records[6]
    assert (
        refused.outcome in ("REFUSED", "TOOL_ERROR") and refused.statement == PG_READ_FILE
    )  # whole, not cut to the comment
    assert "pg_read_file('/etc/passwd')" in (refused.statement or "")
    assert refused.statement_chars == len(PG_READ_FILE)
    unknown = records[7]
    assert json.loads(unknown.arguments or "{}") == {"keyword": "k", "author": "a"}  # no name guessing


def test_statements_past_the_kept_size_keep_a_hash(tmp_path: Path) -> None:
    from mcpkit.sql.audit.record import KEPT_CHARS, kept

    long = "SELECT 1 -- " + "y" * KEPT_CHARS
    text_, digest, chars = kept(long)
    assert text_ == long[:KEPT_CHARS] and chars == len(long)
    import hashlib

    assert digest == hashlib.sha256(long.encode()).hexdigest()


# --- a real server, killed right after answering -------------------------------------------------------


async def _session(args: list[str], pid_file: Path, signum: int, n: int) -> list[str]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", _LAUNCH, str(pid_file), *args],
        cwd=str(ROOT),
    )
    ids = []
    async with Client(params, mode="legacy") as client:
        for i in range(n - 2):
            result = await client.call_tool("execute_query", {"query": f"SELECT {i} AS n", "max_rows": 1})
            ids.append(result.meta["mcpkit/callId"])  # type: ignore[index]
        refused = await client.call_tool("execute_query", {"query": "DROP TABLE sales_demo"})
        ids.append(refused.meta["mcpkit/callId"])  # type: ignore[index]
        last = await client.call_tool("quarterly_revenue_by_region", {"year": 2023})
        ids.append(last.meta["mcpkit/callId"])  # type: ignore[index]
        pid = int(pid_file.read_text())
        os.kill(pid, signum)  # right after the last answer
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the server did not stop on the signal")
    return ids


# `mcpkit sql serve` itself, writing its pid first (so the test can signal the server, not a wrapper).
_LAUNCH = (
    "import os, sys; from pathlib import Path; Path(sys.argv[1]).write_text(str(os.getpid())); "
    "from mcpkit.cli import main; sys.exit(main(sys.argv[2:]))"
)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("signum", "sync"),
    [(signal.SIGKILL, "full"), (signal.SIGKILL, "normal"), (signal.SIGTERM, "full")],
    ids=["sigkill-full", "sigkill-normal", "sigterm"],
)
async def test_killing_the_server_right_after_answers_loses_no_call(
    tmp_path: Path, signum: int, sync: str
) -> None:
    audit = tmp_path / "audit.db"
    args = ["sql", "serve", "--demo", "--audit", str(audit), "--audit-sync", sync]
    ids = await _session(args, tmp_path / "pid", signum, 25)
    store = AuditStore(f"sqlite:///{audit}")
    records = store.read()
    assert [r.call_id for r in records] == ids  # every answered call: started and ended on record
    assert all(r.outcome != "UNFINISHED" for r in records)
    assert records[-2].outcome == "REFUSED" and records[-1].tool == "quarterly_revenue_by_region"
    assert records[0].sql == "SELECT 0 AS n LIMIT 2"
    store.close()
    assert mcpkit_main(["audit", "--audit", str(audit), "--verify"]) == 0


# --- mcpkit audit -----------------------------------------------------------------------------------


def test_cli_table_json_and_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.db"
    store = open_store(path=path)
    now = dt.datetime.now(dt.UTC)
    store.append(call_entries(1, now - dt.timedelta(hours=3), sql="SELECT  1\n LIMIT 26", principal="ann"))
    store.append(call_entries(2, now - dt.timedelta(minutes=5), outcome="REFUSED", reason="write"))
    store.append(call_entries(3, now, tool="list_tables", truncated=True))
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
    assert mcpkit_main(["audit", "--audit", str(path), "--tail", "3"]) == 0
    assert "SELECT  1\\n LIMIT 26" in capsys.readouterr().out  # escaped, not folded
    assert mcpkit_main(["audit", "--audit", str(tmp_path / "missing.db")]) == 2
    assert mcpkit_main(["audit", "--audit", str(path), "--since", "yesterday"]) == 2
    assert "ISO 8601" in capsys.readouterr().err
    assert mcpkit_main(["audit", "--audit", str(path), "--verify", "--tail", "2"]) == 2
    assert mcpkit_main(["audit", "--audit", str(path), "--anchor", "1:abc"]) == 2


def test_render_table_clips_sql_unless_wide() -> None:
    from mcpkit.sql.audit import AuditRecord

    record = AuditRecord(
        call_id="c1", tool="execute_query", outcome="OK", principal="ann",
        sql="SELECT " + ", ".join(f"c{i}" for i in range(40)),
    )  # fmt: skip
    assert render_table([record]).splitlines()[1].endswith("...") and "ann" in render_table([record])
    assert render_table([record], wide=True).splitlines()[1].endswith("c39")


def test_parse_since_forms() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert parse_since("90s", now) == now - dt.timedelta(seconds=90)
    assert parse_since("2d", now) == now - dt.timedelta(days=2)
    assert parse_since("2026-01-01T00:00").tzinfo == dt.UTC


def test_entries_are_canonical_ascii_json() -> None:
    entry = call_entries(1, tool="a\u2028b\x85c")[0]
    assert canonical(entry).isascii() and "\\u2028" in canonical(entry)


@pytest.mark.anyio
async def test_cache_hits_and_report_calls_are_recorded(sqlite_crm: CrmDb, tmp_path: Path) -> None:
    from mcpkit.sql.reports import load_reports

    audit = AuditLog(open_store(path=tmp_path / "audit.db"))
    calls = CallAudit(audit)
    engine = SqlEngine(sqlite_crm.url)
    try:
        service = SqlService(engine, max_rows=50, timeout_s=5.0)
        reports = load_reports(ROOT / "examples" / "reports.yaml", service, calls=calls)
        async with connect(build_server(service, calls=calls, reports=reports)) as client:
            for _ in range(2):
                assert not (await client.call_tool("units_by_year", {})).is_error  # cache_ttl_s: 3600
            await client.call_tool("large_deals", {"product": "Pulse Phone; DROP", "min_revenue": 1})
    finally:
        audit.close()
        engine.close()
    first, second, invalid = open_store(path=tmp_path / "audit.db").read()
    assert (first.cached, second.cached) == (False, True)
    assert first.rows and second.rows is None  # the handler did not run for the cache hit
    assert first.statement and "FROM sales_demo" in first.statement and first.sql == first.statement
    assert invalid.outcome == "INVALID_PARAMS"
    assert json.loads(invalid.arguments or "{}")["product"] == "Pulse Phone; DROP"


@pytest.mark.anyio
async def test_a_nul_in_a_tool_name_is_stored_and_refuses_no_other_call(
    sqlite_crm: CrmDb, pg_audit_dsn: str
) -> None:
    audit = AuditLog(open_store(dsn=pg_audit_dsn))
    engine = SqlEngine(sqlite_crm.url)
    try:
        server = build_server(SqlService(engine, max_rows=50, timeout_s=5.0), calls=CallAudit(audit))
        async with connect(server) as client:

            async def good() -> str:
                done = await client.call_tool("list_tables", {})
                return str((done.meta or {}).get("mcpkit/error", {}).get("code", "OK"))

            async def evil() -> None:
                with pytest.raises(Exception, match="Unknown tool"):
                    await client.call_tool("z\u0000\ud800", {})

            got = await asyncio.gather(*(good() if i % 10 else evil() for i in range(1, 61)))
    finally:
        audit.close()
        engine.close()
    assert [g for g in got if g is not None] == ["OK"] * 54  # none refused as audit_unavailable
    records = open_store(dsn=pg_audit_dsn).read()
    assert len(records) == 60
    evil_records = [r for r in records if r.tool != "list_tables"]
    assert [(r.tool, r.outcome) for r in evil_records] == [("z\u0000\ud800", "UNKNOWN_TOOL")] * 6
    assert len(open_store(dsn=pg_audit_dsn).read(tool="z\u0000\ud800")) == 6  # the filter finds them
    assert mcpkit_main(["audit", "--audit-dsn", pg_audit_dsn, "--verify"]) == 0


def test_one_bad_entry_in_a_group_commit_fails_only_its_own_call(pg_audit_dsn: str) -> None:
    audit = AuditLog(open_store(dsn=pg_audit_dsn))
    bad = {**call_entries(0)[0], "at": "not a time"}  # the store cannot take it

    async def many() -> list[BaseException | None]:
        writes = [audit.write(e) for i in range(1, 41) for e in call_entries(i)[:1]]
        writes.insert(20, audit.write(bad))
        return await asyncio.gather(*writes, return_exceptions=True)

    got = asyncio.run(many())
    audit.close()
    assert [i for i, g in enumerate(got) if g is not None] == [20]
    assert audit.written == 40
    assert mcpkit_main(["audit", "--audit-dsn", pg_audit_dsn, "--verify"]) == 0


@pytest.mark.anyio
async def test_an_unknown_tool_name_is_capped_with_its_hash(sqlite_crm: CrmDb, tmp_path: Path) -> None:
    import hashlib
    import sqlite3

    audit = AuditLog(open_store(path=tmp_path / "audit.db"))
    engine = SqlEngine(sqlite_crm.url)
    huge = "n" * 3_000_000
    try:
        server = build_server(SqlService(engine, max_rows=50, timeout_s=5.0), calls=CallAudit(audit))
        async with connect(server) as client:
            for name in (huge, huge + "x"):
                with pytest.raises(Exception, match="Unknown tool"):
                    await client.call_tool(name, {})
    finally:
        audit.close()
        engine.close()
    first, second = open_store(path=tmp_path / "audit.db").read()
    assert first.tool == "n" * 54 + "...sha256:" + hashlib.sha256(huge.encode()).hexdigest()
    assert len(first.tool) == len(second.tool) == 128 and first.tool != second.tool
    assert [r.tool for r in open_store(path=tmp_path / "audit.db").read(tool=huge)] == [first.tool]
    with sqlite3.connect(tmp_path / "audit.db") as db:
        assert db.execute("SELECT max(length(entry)) FROM mcpkit_audit").fetchone()[0] < 1000
    db.close()
