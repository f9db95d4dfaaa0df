"""PostgreSQL backend memory, enforced by the engine and verified by mcpkit at start-up (issue 10).

Two scratch clusters of this session's own: one started under `prlimit --data` (every backend
inherits the data limit), one without. The shared server at 5432 has no limit and keeps none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client, StdioServerParameters

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.conftest import IN_CI, need
from tests.helpers import ROOT, free_port, text_of
from tests.sql.sql_support import changed, pg_snapshot

# Fingerprints the whole server (roles, databases, settings): runs after the parallel part.
pytestmark = pytest.mark.serial

LIMIT = 512 * 1024**2
"""The limited cluster's data limit per backend, and the `--backend-memory` its servers declare."""
SHARED = 128 * 1024**2  # the clusters' shared_buffers (initdb's default), outside RLIMIT_DATA
SCHEMA = "pgmem_app"
READER = "pgmem_reader"

# The red team's worst cases (rt16 F8 and after), as the model would send them.
WORST = {
    "array_fill 900 x 1 MB": (
        "SELECT length(array_to_string(array_fill(repeat('x', 1000000), ARRAY[900]), '')) AS n"
    ),
    "array_agg 800 x 1 MB": (
        "SELECT cardinality(array_agg(v)) AS n FROM"
        " (SELECT repeat('x', 1000000) || g AS v FROM generate_series(1, 800) g) s"
    ),
    "string_agg 800 x 1 MB": (
        "SELECT length(string_agg(v, '')) AS n FROM"
        " (SELECT repeat('x', 1000000) || g AS v FROM generate_series(1, 800) g) s"
    ),
    "3 x 200 MB concatenated": (
        "SELECT length(repeat('a', 200000000) || repeat('b', 200000000) || repeat('c', 200000000)) AS n"
    ),
    "nested row copies": (
        "SELECT length((SELECT (SELECT a || a || a || a || a || a FROM"
        " (SELECT repeat('x', 100000000) AS a) s1) || 'y') || 'z') AS n"
    ),
}


@dataclass
class Cluster:
    """A scratch cluster: its reader's URL, its administrator's, and where it lives."""

    url: str
    admin: str
    folder: Path
    limit: int | None


def _bindir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_postgres(cmd: list[str]) -> list[str]:
    """As the postgres user when root (initdb refuses root), else as this user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _postmaster_started(admin: str) -> Any:
    with psycopg.connect(admin, autocommit=True) as c:
        row = c.execute("SELECT pg_postmaster_start_time()").fetchone()
        return row[0] if row else None


@pytest.fixture(scope="session")
def _clusters() -> Iterator[dict[str, Cluster]]:
    bindir = _bindir()
    if bindir is None or shutil.which("prlimit") is None:
        need("a scratch PostgreSQL cluster", "initdb or prlimit not found")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        need("a scratch PostgreSQL cluster", "runuser is needed to run initdb as postgres")
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="pgmem-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    clusters: dict[str, Cluster] = {}
    try:
        for name, limit in (("limited", LIMIT), ("unlimited", None)):
            folder, port = root / name, free_port()
            made = subprocess.run(
                _as_postgres([str(bindir / "initdb"), "-D", str(folder), "-A", "trust", "-U", "postgres"]),
                capture_output=True,
                text=True,
                cwd="/tmp",
                check=False,
            )
            if made.returncode != 0:
                need("a scratch PostgreSQL cluster", f"initdb failed: {made.stderr.strip()[-200:]}")
            options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c shared_buffers=128MB"
            start = [str(bindir / "pg_ctl"), "-D", str(folder), "-o", options, "-l", str(folder / "log")]
            start = [*(["prlimit", f"--data={limit}"] if limit else []), *start, "-w", "start"]
            started = subprocess.run(
                _as_postgres(start), capture_output=True, text=True, cwd="/tmp", check=False
            )
            if started.returncode != 0:
                need("a scratch PostgreSQL cluster", f"pg_ctl start failed: {started.stderr.strip()[-200:]}")
            admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            with psycopg.connect(admin, autocommit=True) as c:
                c.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
                c.execute(f"CREATE ROLE {READER} LOGIN CONNECTION LIMIT 7")
                c.execute(f"ALTER ROLE {READER} SET temp_file_limit = '1GB'")
                c.execute(f"ALTER ROLE {READER} SET log_min_messages = 'log'")
                c.execute(f"CREATE SCHEMA {SCHEMA}")
                c.execute(f"CREATE TABLE {SCHEMA}.t (id int PRIMARY KEY, v text)")
                c.execute(
                    f"INSERT INTO {SCHEMA}.t SELECT g, repeat('v', 1000) FROM generate_series(1, 100) g"
                )
                c.execute(f"CREATE SEQUENCE {SCHEMA}.canary_seq")
                c.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {READER}")
                c.execute(f"GRANT SELECT ON {SCHEMA}.t TO {READER}")
            url = f"postgresql://{READER}@127.0.0.1:{port}/postgres"
            clusters[name] = Cluster(url, admin, folder, limit)
        yield clusters
    finally:
        for cluster in clusters.values():
            subprocess.run(
                _as_postgres([str(bindir / "pg_ctl"), "-D", str(cluster.folder), "-m", "fast", "stop"]),
                capture_output=True,
                cwd="/tmp",
                check=False,
            )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def limited(_clusters: dict[str, Cluster]) -> Cluster:
    return _clusters["limited"]


@pytest.fixture
def unlimited(_clusters: dict[str, Cluster]) -> Cluster:
    return _clusters["unlimited"]


def _mcpkit(*args: str, opt_in: bool = False) -> subprocess.CompletedProcess[str]:
    """`mcpkit sql ARGS` without the test suite's `$MCPKIT_SQL_ALLOW` (unless `opt_in`)."""
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_SQL_ALLOW"}
    if opt_in:
        env["MCPKIT_SQL_ALLOW"] = "unbounded-memory"
    return subprocess.run(
        [sys.executable, "-m", "mcpkit", "sql", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- (a) and (b): start-up ---------------------------------------------------------------------


def test_an_unlimited_server_is_refused_at_start_up_with_one_line(unlimited: Cluster) -> None:
    for command in ("serve", "query"):
        args = [command, "--dsn", unlimited.url, "--backend-memory", "512M"]
        done = _mcpkit(*args, *(["--no-audit"] if command == "serve" else ["SELECT 1 AS one"]))
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("mcpkit sql: a database backend allocated 512 MiB (--backend-memory)")
        for fix in (
            "LimitDATA=512M",
            "ulimit -d 524288",
            "prlimit --data=536870912",
            "--allow unbounded-memory",
        ):
            assert fix in last
        assert "Traceback" not in done.stderr


def test_a_url_of_several_hosts_is_refused_at_start_up(limited: Cluster, unlimited: Cluster) -> None:
    # red team rt21 F4: the probe proved the limited host it reached first, then calls ran on the other
    port = lambda url: url.rsplit(":", 1)[1].split("/")[0]  # noqa: E731
    first, second = f"127.0.0.1:{port(limited.url)}", f"127.0.0.1:{port(unlimited.url)}"
    for query in (
        f"host={first}&host={second}&load_balance_hosts=random",
        f"host=127.0.0.1,127.0.0.1&port={port(limited.url)},{port(unlimited.url)}",
    ):
        dsn = f"postgresql://{READER}@/postgres?{query}"
        for command in ("serve", "query"):
            args = [command, "--dsn", dsn, "--backend-memory", "512M"]
            done = _mcpkit(*args, *(["--no-audit"] if command == "serve" else ["SELECT 1 AS one"]))
            assert done.returncode == 2, done.stderr
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith(f"mcpkit sql: the URL names 2 database hosts ({first}, {second})"), last
            assert "--allow unbounded-memory" in last and "Traceback" not in done.stderr
    one = _mcpkit(
        "query",
        "--dsn",
        f"postgresql://{READER}@/postgres?host={first}",
        "--backend-memory",
        "512M",
        "SELECT 1 AS one",
    )
    assert one.returncode == 0, one.stderr


def test_a_budget_one_allocation_cannot_prove_is_refused(limited: Cluster) -> None:
    done = _mcpkit("query", "--dsn", limited.url, "--backend-memory", "2G", "SELECT 1 AS one")
    assert done.returncode == 2
    assert "--backend-memory: 2G is outside 64M..1G" in done.stderr


def test_the_opt_in_starts_with_a_warning(unlimited: Cluster) -> None:
    for given in (["--allow", "unbounded-memory"], []):
        done = _mcpkit("query", "--dsn", unlimited.url, *given, "SELECT 1 AS one", opt_in=not given)
        assert done.returncode == 0, done.stderr
        assert "--allow unbounded-memory: the database's memory per call is not verified" in done.stderr
        assert "| 1 |" in done.stdout


@pytest.mark.anyio
async def test_over_stdio_only_the_opt_in_serves_an_unlimited_server(unlimited: Cluster) -> None:
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", unlimited.url, "--no-audit"]
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_SQL_ALLOW"}
    refused = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)
    with pytest.raises(Exception):  # noqa: B017, PT011 (the server exits 2 before it answers)
        async with Client(refused, mode="legacy") as client:
            await client.call_tool("execute_query", {"query": "SELECT 1 AS n"})
    allowed = [*args, "--allow", "unbounded-memory"]
    params = StdioServerParameters(command=sys.executable, args=allowed, cwd=str(ROOT), env=env)
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("execute_query", {"query": "SELECT 41 + 1 AS n"})
        assert not result.is_error and "42" in text_of(result)


# --- (c): a limited server -----------------------------------------------------------------------


def _code(result: Any) -> tuple[str, str]:
    error = (result.meta or {}).get("mcpkit/error", {})
    return str(error.get("code", "OK")), str((error.get("data") or {}).get("reason", ""))


@pytest.mark.anyio
async def test_a_limited_server_starts_and_answers_the_worst_cases_with_the_resource_error(
    limited: Cluster, tmp_path: Path
) -> None:
    before, started = pg_snapshot(limited.admin, SCHEMA, tmp_path), _postmaster_started(limited.admin)
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", limited.url, "--no-audit", "--backend-memory", "512M"]
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_SQL_ALLOW"}
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT), env=env)
    async with Client(params, mode="legacy") as client:
        for name, sql in WORST.items():
            result = await client.call_tool("execute_query", {"query": sql})
            assert result.is_error, name
            assert _code(result) == ("TOOL_ERROR", "resource"), (name, text_of(result))
            shown = text_of(result)
            assert "Failed on request" not in shown and "memory context" not in shown, name
            if "_agg" in name:  # admitted by the parser (one 1 MB value per row): the engine stopped it
                assert "more memory than the database allows one call" in shown, (name, shown)
            after = await client.call_tool(
                "execute_query", {"query": f"SELECT count(*) AS n FROM {SCHEMA}.t"}
            )
            assert not after.is_error and "100" in text_of(after), name
    assert changed(before, pg_snapshot(limited.admin, SCHEMA, tmp_path)) == []
    assert _postmaster_started(limited.admin) == started  # no crash, no restart


def _peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_the_engine_stops_what_the_parser_lets_through(limited: Cluster, tmp_path: Path) -> None:
    """Without admission (the profile's execution path, and a bare connection): the data limit alone
    stops every worst case with 53200, the backend's peak stays under the limit plus shared memory,
    and another connection answers during and after."""
    if os.geteuid() != 0 and not IN_CI:  # /proc/PID/status of postgres's backends
        pytest.skip("reading the backend's peak memory needs root or the postgres user")
    from mcpkit.sql.errors import MEMORY_EXCEEDED

    before, started = pg_snapshot(limited.admin, SCHEMA, tmp_path), _postmaster_started(limited.admin)
    engine = SqlEngine(limited.url, pool_size=0)
    try:
        for name, sql in WORST.items():
            with pytest.raises(QueryFailed) as failed:
                engine.execute(sql, None, 1, 30.0, "pgmem-engine")
            assert failed.value.kind == "resource" and failed.value.message == MEMORY_EXCEEDED, name
    finally:
        engine.close()
    with psycopg.connect(limited.url, autocommit=True) as conn, psycopg.connect(limited.url) as other:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid, answers, stop = int(row[0]), [], threading.Event()

        def keep_asking() -> None:
            while not stop.is_set():
                started_at = time.monotonic()
                other.execute("SELECT 1").fetchone()
                answers.append(time.monotonic() - started_at)
                time.sleep(0.02)

        asking = threading.Thread(target=keep_asking)
        asking.start()
        try:
            for name, sql in WORST.items():
                with pytest.raises(psycopg.Error) as raised:
                    conn.execute(sql)
                assert raised.value.sqlstate == "53200", (name, raised.value)
                assert _peak_kib(pid) * 1024 < LIMIT + SHARED + 64 * 1024**2, (name, _peak_kib(pid))
        finally:
            stop.set()
            asking.join()
        assert answers and max(answers) < 2.0
        assert conn.execute("SELECT 2").fetchone() == (2,)  # the same backend lives on
    assert changed(before, pg_snapshot(limited.admin, SCHEMA, tmp_path)) == []
    assert _postmaster_started(limited.admin) == started


def test_the_probe_is_cheap_on_a_limited_server(limited: Cluster) -> None:
    from mcpkit.sql.checks import backend_memory

    engine = SqlEngine(limited.url, pool_size=0)
    try:
        took = time.monotonic()
        verdict = backend_memory(engine, LIMIT, ())
        took = time.monotonic() - took
        assert verdict is not None and verdict[0] == "ok", verdict
        assert took < 2.0
        assert backend_memory(engine, 1024**3, ["unbounded-memory"]) == (
            "warn",
            "--allow unbounded-memory: the database's memory per call is not verified; one call may "
            "take the host's memory (only the parser's guards bound it)",
        )
        service = SqlService(engine, timeout_s=10)
        assert service.query("SELECT 1 AS one", call_id="after")[0] is not None
    finally:
        engine.close()


# --- (d): doctor ---------------------------------------------------------------------------------


def test_doctor_prints_the_backend_memory_line(limited: Cluster, unlimited: Cluster) -> None:
    ok = _mcpkit("doctor", "--dsn", limited.url, "--backend-memory", "512M")
    line = next(x for x in ok.stdout.splitlines() if "backend memory" in x)
    assert line.startswith("ok   backend memory: the database refused one allocation of 512 MiB"), line
    assert ok.returncode == 0, ok.stdout
    loose = _mcpkit("doctor", "--dsn", limited.url, "--backend-memory", "256M")  # the limit is above it
    assert loose.returncode == 1
    assert "fail backend memory: a database backend allocated 256 MiB" in loose.stdout
    bad = _mcpkit("doctor", "--dsn", unlimited.url)
    assert bad.returncode == 1
    assert "fail backend memory: a database backend allocated 1 GiB (--backend-memory)" in bad.stdout
    warned = _mcpkit("doctor", "--dsn", unlimited.url, opt_in=True)
    assert "warn backend memory: --allow unbounded-memory" in warned.stdout
    assert warned.returncode == 0, warned.stdout


def test_grant_prints_how_to_set_the_limit_as_comments(limited: Cluster) -> None:
    role = "pgmem_granted"
    done = _mcpkit("grant", "--dsn", limited.admin, "--role", role, "--tables", f"{SCHEMA}.t")
    assert done.returncode == 0, done.stderr
    comments = [line for line in done.stdout.splitlines() if line.startswith("-- ")]
    assert "--   systemctl edit postgresql@<version>-main  ->  [Service]  LimitDATA=1G" in comments
    assert "--   or: ulimit -d 1048576 (or prlimit --data=1073741824) before pg_ctl" in comments
    with psycopg.connect(limited.admin, autocommit=True) as c:  # the script still runs as printed
        c.execute(done.stdout.encode())
        c.execute(f"DROP OWNED BY {role}")
        c.execute(f"DROP ROLE {role}")
