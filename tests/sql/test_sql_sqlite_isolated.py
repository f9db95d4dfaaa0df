"""SQLite statements run in worker processes the parent kills at the deadline (red team rtC F2, F4, F5,
F7, F9): one VM step that never reaches an interrupt check (a false `WHEN` jumps forward, a NOCASE
comparison of 20 MB, a 126-path `json_extract`, a chain over `randomblob`) ran for tens of seconds
past a 2 s timeout, holding a pool slot; now each call answers `timeout` within the deadline, the
engine's grace and the kill's slack, and another caller's `SELECT 1` gets a worker meanwhile. Each
worker's data segment is capped (`RLIMIT_DATA`): a call past it fails as `resource`, the next works.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

from mcpkit.sql.admission import Admitted
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.engines.isolated import IsolatedSqlite
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.service import SqlService

TIMEOUT_S = 2.0
SLACK_S = 5.0  # generous: the box is shared; the old code took 20-90 s
_NOCASE = "t = t COLLATE NOCASE"
_PATHS = ", ".join(["'$.zz'"] * 126)
SHAPES = {
    "F4-compares": "SELECT " + " + ".join([f"({_NOCASE})"] * 300) + " AS n FROM big WHERE id = 1",
    "F5-case-whens": "SELECT CASE "
    + " ".join(f"WHEN t <> t COLLATE NOCASE THEN {i}" for i in range(300))
    + " ELSE 0 END AS n FROM big WHERE id = 1",
    "F2-json-paths": "SELECT "
    + ", ".join(f"length(json_extract(doc, {_PATHS})) AS a{i}" for i in range(16))
    + " FROM js WHERE id = 1",
    "F9-randomblob": "SELECT " + " + ".join(["length(upper(hex(randomblob(16000000))))"] * 200) + " AS n",
}


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    # The engine's bound is under test, not admission's (which may refuse some of these shapes).
    return Admitted(sql=sql, tree=exp.Select())


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("sqliso") / "big.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, t TEXT)")
        conn.execute("INSERT INTO big VALUES (1, ?)", ("AbCd" * 5_000_000,))  # 20 MB
        conn.execute("CREATE TABLE js (id INTEGER PRIMARY KEY, doc TEXT)")
        conn.execute("INSERT INTO js VALUES (1, ?)", (json.dumps({f"k{i}": i for i in range(500_000)}),))
        conn.commit()
    return f"sqlite:///{path}"


def _service(url: str, pool_size: int) -> SqlService:
    service = SqlService(SqlEngine(url, pool_size=pool_size, isolate=True), timeout_s=TIMEOUT_S)
    service._admit = _passthrough
    return service


def _call(service: SqlService, sql: str, out: dict[str, Any], key: str) -> None:
    started = time.monotonic()
    try:
        service.query(sql, call_id=key, max_rows=1)
        out[key] = ("answered", time.monotonic() - started)
    except (QueryTimeout, QueryFailed) as exc:
        reason = (exc.data or {}).get("reason")
        out[key] = (reason, time.monotonic() - started)


def test_sqlite_one_step_shapes_time_out_and_do_not_starve_a_select_one(big_db: str) -> None:
    # As many heavy calls as workers (red team F7: every slot held), and a probe from another caller.
    service = _service(big_db, pool_size=len(SHAPES))
    service.query("SELECT 1", call_id="warm", max_rows=1)  # the fork server's imports, out of the timing
    out: dict[str, Any] = {}
    threads = [
        threading.Thread(target=_call, args=(service, sql, out, key), daemon=True)
        for key, sql in SHAPES.items()
    ]
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)
        _call(service, "SELECT 1 AS one", out, "probe")
        for t in threads:
            t.join(TIMEOUT_S + SLACK_S)
        for key in SHAPES:
            assert key in out, f"{key} still ran after {TIMEOUT_S + SLACK_S} s"
            reason, took = out[key]
            # the worker's own heap limit (one call's share) may end a comparison chain first
            assert reason in ("timeout", "resource"), (key, out[key])
            assert took < TIMEOUT_S + SLACK_S, (key, took)
        assert out["probe"][0] == "answered" and out["probe"][1] < TIMEOUT_S + 2 * SLACK_S, out["probe"]
        assert [key for key in SHAPES if out[key][0] == "timeout"], out
        assert service.engine.isolated is not None and service.engine.isolated.killed >= 1
        result, _ = service.query("SELECT 2 AS two", call_id="after", max_rows=1)
        assert result.rows == [[2]]
    finally:
        for t in threads:
            t.join(120)  # the old code's steps end eventually; never leave them running
        service.engine.close()


def _vm_data_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmData:")[1].split()[0])


def test_sqlite_worker_memory_limit_fails_a_huge_value_as_resource(big_db: str) -> None:
    sql = "SELECT length(upper(hex(randomblob(16000000)))) AS n"  # 32 MB + 32 MB, under SQLite's heap limit
    service = _service(big_db, pool_size=1)
    engine = service.engine
    try:
        result, _ = service.query(sql, call_id="fits", max_rows=1)
        assert result.rows == [[32_000_000]]  # the default limit leaves room for it
        assert isinstance(engine, SqlEngine) and engine.isolated is not None
        baseline = _vm_data_kb(engine.isolated._idle[0].pid) * 1024
        engine.isolated.close()
        engine.isolated = IsolatedSqlite(
            engine.url.render_as_string(hide_password=False),
            engine.profile,  # type: ignore[arg-type]
            size=1,
            wait_s=30.0,
            grace_s=1.0,
            memory_bytes=baseline + 40 * 1024 * 1024,
        )
        with pytest.raises(QueryFailed) as info:
            service.query(sql, call_id="huge", max_rows=1)
        assert info.value.data is not None and info.value.data["reason"] == "resource"
        result, _ = service.query("SELECT 1 AS one", call_id="after", max_rows=1)
        assert result.rows == [[1]]
    finally:
        engine.close()


def test_sqlite_isolation_can_be_turned_off(big_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert SqlEngine(big_db, isolate=False).isolated is None
    monkeypatch.setenv("MCPKIT_SQLITE_ISOLATE", "0")
    assert SqlEngine(big_db).isolated is None
    monkeypatch.setenv("MCPKIT_SQLITE_ISOLATE", "1")
    engine = SqlEngine(big_db)
    try:
        assert engine.isolated is not None
        assert engine.execute("SELECT 7", None, 1, TIMEOUT_S, "on").rows == ((7,),)
    finally:
        engine.close()


def test_sqlite_isolation_is_the_default(big_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No option and no variable: SQLite calls run in workers; the command line's `--no-isolate` is the
    opt-out. (`:memory:` is refused by the profile: SQLite needs a database file.)"""
    import argparse

    from mcpkit.sql import cli

    monkeypatch.delenv("MCPKIT_SQLITE_ISOLATE", raising=False)
    engine = SqlEngine(big_db)
    try:
        assert engine.isolated is not None
        assert engine.execute("SELECT 7", None, 1, TIMEOUT_S, "default").rows == ((7,),)
        assert engine.isolated.started >= 1
    finally:
        engine.close()
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    assert parser.parse_args(["sql", "serve", "--dsn", big_db]).isolate is None  # the engine's default: on
    assert parser.parse_args(["sql", "serve", "--dsn", big_db, "--no-isolate"]).isolate is False
