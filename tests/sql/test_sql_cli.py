"""`mcpkit sql ...` as a user runs it: real exit codes; the first tests in real subprocesses (the entry
point, an argument byte that is not UTF-8), the rest in this process (`mcpkit_here`: 35 fresh
interpreters were a third of this file's time)."""

from __future__ import annotations

import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.helpers import ROOT, run_mcpkit
from tests.sql.sql_support import DbEnv, mcpkit_here, mysql_scratch


def mcpkit(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """`mcpkit sql ARGS` in this process (`timeout`: only a subprocess's)."""
    return mcpkit_here("sql", *args)


def mcpkit_process(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """`python -m mcpkit sql ARGS` in a subprocess, as a user runs it."""
    return run_mcpkit("sql", *args, timeout=timeout)


def test_query_answered_exit_0() -> None:
    done = mcpkit_process(
        "query", "--demo", "--max-rows", "2", "SELECT id, region FROM sales_demo ORDER BY id"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("2 rows sent; more rows exist")
    assert lines[2] == "| id | region |" and len(lines) == 6


def test_query_refused_exit_3() -> None:
    done = mcpkit_process("query", "--demo", "UPDATE sales_demo SET units = 0")
    assert done.returncode == 3
    assert done.stdout.startswith("REFUSED: This server is read-only")


def test_query_of_text_no_driver_can_send_is_one_refused_line() -> None:
    # A byte that is not UTF-8 in the argument reaches Python as an unpaired surrogate: every
    # driver raised UnicodeEncodeError past the engine, and the CLI printed a traceback (exit 1).
    done = mcpkit_process("query", "--demo", "SELECT 'a\udcffb' AS x")
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == [
        "REFUSED: The query is not valid Unicode text (it holds an unpaired surrogate)."
    ]
    assert "Traceback" not in done.stderr


def test_query_failed_in_the_database_exit_4_masked() -> None:
    done = mcpkit("query", "--demo", "SELECT hidden_column FROM sales_demo")
    assert done.returncode == 4
    assert done.stdout.startswith("TOOL_ERROR: ") and "hidden_column" not in done.stdout


def test_query_usage_errors_exit_2(tmp_path: Path) -> None:
    assert mcpkit("query", "--dsn", f"sqlite:///{tmp_path}/missing.db", "SELECT 1").returncode == 2
    assert mcpkit("query", "--dsn", "not a url", "SELECT 1").returncode == 2
    assert mcpkit("query", "--demo", "--max-rows", "0", "SELECT 1").returncode == 2
    assert mcpkit("query", "SELECT 1").returncode == 2  # argparse: --dsn or --demo is required
    bad_pool = mcpkit("query", "--demo", "--pool-size", "-1", "SELECT 1")
    assert bad_pool.returncode == 2 and "--pool-size" in bad_pool.stderr
    assert mcpkit("query", "--demo", "--pool-size", "0", "SELECT 1").returncode == 0  # no pool


@pytest.mark.postgres
def test_query_refuses_a_superuser_and_allow_superuser_accepts_only_that(pg_url: str) -> None:
    refused = mcpkit("query", "--dsn", pg_url, "SELECT 1 AS one")
    assert (
        refused.returncode == 2 and "ALTER ROLE postgres NOSUPERUSER (or --allow superuser)" in refused.stderr
    )
    # Before, --allow-superuser switched every check off; now what the superuser owns still counts.
    allowed = mcpkit("query", "--dsn", pg_url, "--allow-superuser", "SELECT 1 AS one")
    assert (
        allowed.returncode == 2
        and "NOSUPERUSER" not in allowed.stderr
        and "can CREATE in schema" in allowed.stderr
    )
    assert "Traceback" not in allowed.stderr


def test_functions_allowlist(tmp_path: Path) -> None:
    allow = tmp_path / "allow.txt"
    allow.write_text("count\nsum\n")
    ok = mcpkit("query", "--demo", "--functions", str(allow), "SELECT count(*), sum(units) FROM sales_demo")
    no = mcpkit("query", "--demo", "--functions", str(allow), "SELECT max(units) FROM sales_demo")
    assert ok.returncode == 0 and no.returncode == 3 and "function max is not on" in no.stdout


def test_doctor_demo_ok() -> None:
    done = mcpkit("doctor", "--demo")
    assert done.returncode == 0, done.stdout + done.stderr
    names = [line.split(":")[0].split(maxsplit=1)[1] for line in done.stdout.splitlines()]
    assert names == [
        "reachable",
        "dialect",
        "least privilege",
        "writable tables",
        "read-only session",
        "statement timeout",
        "tools lint",
    ]


@pytest.mark.postgres
def test_doctor_fails_on_a_superuser_and_passes_read_only_role(pg_url: str, pg_env: DbEnv) -> None:
    su = mcpkit("doctor", "--dsn", pg_url)
    assert su.returncode == 1 and su.stdout.splitlines()[2].startswith(
        "fail least privilege: role postgres is a"
    )
    ro = mcpkit("doctor", "--dsn", pg_env.ro_url)
    assert ro.returncode == 0, ro.stdout
    # the test role has no CONNECTION LIMIT, temp_file_limit nor quiet log_min_messages: told, not refused;
    # the shared server has no data limit per backend, which $MCPKIT_SQL_ALLOW accepts (tests/conftest.py)
    told = ("ok", "warn connection limit", "warn temp file limit", "warn error log", "warn backend memory")
    assert all(line.startswith(told) for line in ro.stdout.splitlines()), ro.stdout
    assert "warn temp file limit: " in ro.stdout and "SET temp_file_limit = '1GB'" in ro.stdout
    assert "warn error log: " in ro.stdout and "SET log_min_messages = 'log'" in ro.stdout


def test_demo_db_path(tmp_path: Path) -> None:
    target = tmp_path / "demo.db"
    assert mcpkit("demo-db", str(target)).returncode == 0
    assert sqlite3.connect(target).execute("SELECT count(*) FROM sales_demo").fetchone() == (3000,)
    assert mcpkit("demo-db", str(target)).returncode == 2
    assert mcpkit("demo-db", str(target), "--force").returncode == 0


@pytest.mark.postgres
def test_demo_db_into_postgres(pg_url: str) -> None:
    schema = f"mcpkit_demo_{secrets.token_hex(4)}"
    url = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            done = mcpkit("demo-db", "--dsn", pg_url, "--schema", schema)
            assert done.returncode == 0, done.stderr
            assert conn.execute(f"SELECT count(*) FROM {schema}.product_vectors").fetchone() == (200,)
            dims = conn.execute(f"SELECT array_length(embedding, 1) FROM {schema}.product_vectors LIMIT 1")
            assert dims.fetchone() == (384,)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_serve_stdio_lists_tools() -> None:
    request = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        '{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
    )
    # stdin stays open until the answer is read: closing it is the client's shutdown signal.
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "sql", "serve", "--demo", "--allowed-tools", "execute_query"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request)
    proc.stdin.flush()
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if '"id":2' in line.replace(" ", ""):
            break
    proc.stdin.close()
    proc.wait(timeout=30)
    listing = [line for line in lines if '"id":2' in line.replace(" ", "")]
    assert listing and '"execute_query"' in listing[0] and '"list_tables"' not in listing[0]


# --- doctor --mask: the same start-up checks as serve --mask --------------------------------------


def _masks(tmp_path: Path, *columns: str) -> str:
    path = tmp_path / "masks.yaml"
    path.write_text("masks:\n" + "".join(f"  - '{c}'\n" for c in columns), encoding="utf-8")
    return str(path)


def _fails(done: subprocess.CompletedProcess[str], name: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith(f"fail {name}:")]


def test_doctor_mask_sqlite_the_authorizer_withholds(tmp_path: Path) -> None:
    done = mcpkit("doctor", "--demo", "--mask", _masks(tmp_path, "sales_demo.region", "*.notes"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   masks: the authorizer withholds all 2 masked column(s) of 1 table(s)" in done.stdout
    nothing = mcpkit("doctor", "--demo", "--mask", _masks(tmp_path, "nowhere*.col"))  # a glob: lenient
    assert "warn masks:" in nothing.stdout and nothing.returncode == 0, nothing.stdout
    typo = mcpkit(
        "doctor", "--demo", "--mask", _masks(tmp_path, "nowhere.col")
    )  # literal: red team mask17 F5
    assert "fail masks:" in typo.stdout and "there is no table or view nowhere" in typo.stdout, typo.stdout
    assert typo.returncode != 0


def test_query_answers_as_serve_mask_would_from_the_option_and_a_sources_file(tmp_path: Path) -> None:
    # The query CLI prints what the agent would see: a sources file's mask: applies (it was dropped).
    demo = tmp_path / "demo.db"
    assert mcpkit("demo-db", str(demo)).returncode == 0
    masks = _masks(tmp_path, "sales_demo.region")
    sources = tmp_path / "sources.yaml"
    text = f"sources:\n  sales:\n    dsn: sqlite:///{demo}\n    mask: masks.yaml\n"
    sources.write_text(text, encoding="utf-8")
    sql = "SELECT id, region FROM sales_demo ORDER BY id LIMIT 1"
    for how in (["--sources", str(sources)], ["--dsn", f"sqlite:///{demo}", "--mask", masks]):
        done = mcpkit("query", *how, sql)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[-1] == "| 1 | <masked> |", done.stdout
    refused = mcpkit("query", "--sources", str(sources), "SELECT id FROM sales_demo WHERE region = 'EMEA'")
    assert refused.returncode == 3, refused.stdout


@pytest.mark.postgres
def test_doctor_mask_postgres_reports_what_serve_refuses(pg_env: DbEnv, tmp_path: Path) -> None:
    masks = _masks(tmp_path, "sales_demo.region")
    doctor = mcpkit("doctor", "--dsn", pg_env.ro_url, "--mask", masks)
    assert doctor.returncode == 1, doctor.stdout
    fails = _fails(doctor, "masks")
    assert fails and all("REVOKE SELECT" in f and "GRANT SELECT (" in f for f in fails), fails
    serve = mcpkit("serve", "--dsn", pg_env.ro_url, "--mask", masks, "--no-audit", timeout=60)
    assert serve.returncode == 2, serve.stderr
    refused = [line.strip() for line in serve.stderr.splitlines() if line.startswith("  ")]
    assert refused == fails


@pytest.mark.mysql
def test_doctor_mask_mariadb_fails_then_passes_after_the_printed_fix(mysql_url: str, tmp_path: Path) -> None:
    with mysql_scratch(mysql_url, "dmask") as scratch:
        with scratch.admin.cursor() as c:
            c.execute(f"CREATE TABLE {scratch.db}.people (id INT, email VARCHAR(50), name VARCHAR(50))")
            c.execute(f"GRANT SELECT ON {scratch.db}.people TO '{scratch.reader}'@'%'")
        masks = _masks(tmp_path, "people.email")
        doctor = mcpkit("doctor", "--dsn", scratch.reader_url, "--mask", masks)
        assert doctor.returncode == 1, doctor.stdout
        (line,) = _fails(doctor, "masks")
        assert line.startswith(f"can read masked column(s) email of `{scratch.db}`.`people`: REVOKE"), line
        serve = mcpkit("serve", "--dsn", scratch.reader_url, "--mask", masks, "--no-audit", timeout=60)
        assert serve.returncode == 2 and f"  {line}" in serve.stderr.splitlines(), serve.stderr
        fix = line.split(": ", 1)[1].split(" (a SELECT on")[0]
        with scratch.admin.cursor() as c:
            for statement in fix.split("; "):
                c.execute(statement)
        clean = mcpkit("doctor", "--dsn", scratch.reader_url, "--mask", masks)
        assert clean.returncode == 0, clean.stdout
        assert "ok   masks: the database withholds all 1 masked column(s) of 1 table(s)" in clean.stdout


def test_doctor_mask_warns_where_the_scan_order_follows_a_masked_column(tmp_path: Path) -> None:
    path = tmp_path / "crm.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT, email TEXT)")
        db.execute("CREATE INDEX by_email ON customers (email, name)")
    db.close()
    done = mcpkit("doctor", "--dsn", f"sqlite:///{path}", "--mask", _masks(tmp_path, "customers.email"))
    assert done.returncode == 0, done.stdout + done.stderr
    warned = [line for line in done.stdout.splitlines() if line.startswith("warn scan order:")]
    assert warned == [
        "warn scan order: scan order may follow masked column customers.email (index by_email):"
        " order-dependent answers can reveal the ranking of its values; see docs/masking.md"
    ], done.stdout
