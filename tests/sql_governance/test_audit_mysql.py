"""MariaDB as the audit store: the same chain, group commit, verify and whole statements as elsewhere."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from mcpkit.cli import main as mcpkit_main
from mcpkit.sql.audit import AuditLog, open_store
from mcpkit.sql.audit.chain import canonical
from tests.sql_governance.test_audit import call_entries
from tests.sql_governance.test_audit_chain import _race, _verify_dsn

pytestmark = pytest.mark.mysql


def test_mariadb_store_group_commits_and_verifies(
    mysql_audit_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(dsn=mysql_audit_dsn)
    store.check()  # innodb_flush_log_at_trx_commit = 1 here: --audit-sync full is kept
    audit = AuditLog(store)

    async def many() -> None:
        await asyncio.gather(*(audit.write(e) for i in range(40) for e in call_entries(i)[:1]))
        await asyncio.gather(*(audit.write(call_entries(i)[1]) for i in range(40)))

    asyncio.run(many())
    assert audit.written == 80 and audit.commits < 80
    audit.close()
    reader = open_store(dsn=mysql_audit_dsn)
    records = reader.read()
    assert len(records) == 40 and all(r.outcome == "OK" for r in records)
    assert reader.mismatched_columns() == []
    reader.close()
    assert mcpkit_main(["audit", "--audit-dsn", mysql_audit_dsn, "--verify"]) == 0
    assert "ok: 80 entries, chain intact" in capsys.readouterr().out


def test_mariadb_keeps_long_statements_times_and_any_character(
    mysql_audit_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A TEXT column holds 64 KiB: a kept statement is up to 100,000 characters (more in bytes).
    at = dt.datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=dt.UTC)
    start, end = call_entries(1, at=at)
    start["statement"] = "SELECT '" + "é\u202e\x1b" * 33_000 + "'"
    store = open_store(dsn=mysql_audit_dsn)
    store.append([start, end])
    assert store.mismatched_columns() == []
    with store.engine.connect() as c:
        (entry,) = c.exec_driver_sql("SELECT entry FROM mcpkit_audit WHERE seq = 1").one()
        (when,) = c.exec_driver_sql("SELECT at FROM mcpkit_audit WHERE seq = 1").one()
    assert entry == canonical(start) and len(entry) > 65_535
    assert when.microsecond == 123456
    store.close()
    assert mcpkit_main(["audit", "--audit-dsn", mysql_audit_dsn, "--verify"]) == 0
    assert "chain intact" in capsys.readouterr().out


def test_two_writers_on_one_mariadb_table_make_one_chain(
    mysql_audit_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stores = [open_store(dsn=mysql_audit_dsn), open_store(dsn=mysql_audit_dsn)]
    _race(stores, range(25))  # the table is created inside the race too
    code, out = _verify_dsn(mysql_audit_dsn, capsys)
    assert code == 0 and "ok: 100 entries" in out


def test_a_tampered_mariadb_log_fails_verify(
    mysql_audit_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(dsn=mysql_audit_dsn)
    for i in range(5):
        store.append(call_entries(i))
    with store.engine.begin() as c:
        c.exec_driver_sql("DELETE FROM mcpkit_audit WHERE seq = 3")
    store.close()
    code, out = _verify_dsn(mysql_audit_dsn, capsys)
    assert code == 1 and "entries 3-3 are missing" in out
