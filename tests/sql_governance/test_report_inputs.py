"""Report inputs mean what the YAML says: `pattern` is a whole-value match everywhere (published schema,
validation, default), LIKE parameters bind `%`, `_` and the escape character as literals on every engine,
and no parameter reaches a regex, GLOB, SIMILAR TO or full-text pattern.

The per-engine test runs `mcpkit sql serve --reports` as a real stdio subprocess and calls it through the
official client, over a probe table whose values contain the wildcards themselves.
"""

from __future__ import annotations

import json
import secrets as tokens
import sqlite3
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import regress
from mcp import Client, StdioServerParameters
from pydantic import ValidationError

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.reports import ReportsError, build_report_tools, input_model
from mcpkit.sql.reports.pattern import anchored, full_match, pattern_problem
from mcpkit.sql.reports.spec import ParamSpec
from mcpkit.sql.service import SqlService
from tests.helpers import ROOT, UNBOUNDED_MEMORY, run_mcpkit
from tests.sql.sql_support import mysql_admin, pg_admin
from tests.sql_governance.conftest import CrmDb

PROBE = (
    "Cust.*|a",
    "customer",
    "50% off",
    "50x off",
    "50_off",
    "5_00",
    "a!b",
    "a\\b",
    "abc",
    "x%y",
    "[ab]c",
)

REPORTS = textwrap.dedent(
    """
    reports:
      - name: starting_with
        description: Probe values that start with the given text.
        parameters:
          prefix: {type: string, like: prefix, description: The first characters.}
        sql: SELECT v FROM {table} WHERE v LIKE :prefix ORDER BY v
        max_rows: 50
      - name: containing
        description: Probe values that contain the given text.
        parameters:
          part: {type: string, like: contains, description: Any part of the value.}
        sql: SELECT v FROM {table} WHERE v LIKE :part ORDER BY v
        max_rows: 50
      - name: matching
        description: Probe values matching a LIKE pattern the caller writes.
        parameters:
          pattern: {type: string, like: wildcards, description: "% and _ are wildcards here."}
        sql: SELECT v FROM {table} WHERE v LIKE :pattern ORDER BY v
        max_rows: 50
      - name: by_code
        description: Probe values equal to a lower-case code.
        parameters:
          code: {type: string, pattern: "[a-z]+", description: Lower-case letters only.}
          keyword: {type: string, description: Any text and recorded as sent.}
          author: {type: string, description: Any text and recorded as sent.}
          api_token: {type: string, secret: true, description: Declared secret.}
        sql: >-
          SELECT v FROM {table}
          WHERE v = :code AND :keyword = :keyword AND :author = :author AND :api_token = :api_token
        max_rows: 50
    """
)


# --- the pattern, as each engine reads it ------------------------------------------------------------

VALUES = ("abc", "Cust.*|a", "abc\n", "\nabc", "ab c", "ABC", "", "a\u2028", "abc\r", "é")
PATTERNS = ("[a-z]+", "[A-Za-z0-9 ]{1,60}", "^[a-z]+$", "a|b", "[a-z]+|[0-9]+", "x?", "(ab|cd)*")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_server_and_every_ecma_engine_agree_on_the_whole_value(pattern: str) -> None:
    assert pattern_problem(pattern) is None
    model = input_model("probe", [ParamSpec("code", "string", pattern=pattern, max_length=100)])
    published = model.model_json_schema()["properties"]["code"]["pattern"]
    assert published == anchored(pattern)
    for value in VALUES:
        try:
            model.model_validate({"code": value}, strict=True)
            server = True
        except ValidationError:
            server = False
        # JSON Schema `pattern` is an unanchored ECMA-262 search, with or without the `u` flag.
        for flags in ("", "u"):
            client = regress.Regex(published, flags).find(value) is not None
            assert client == server, (pattern, value, flags)
        assert server == full_match(pattern, value)


def test_search_semantics_are_gone() -> None:
    model = input_model("probe", [ParamSpec("code", "string", pattern="[a-z]+")])
    for bad in ("Cust.*|a", "abc\n", "ABC", "a b", "%", "_", "a%"):
        with pytest.raises(ValidationError):
            model.model_validate({"code": bad}, strict=True)
    assert model.model_validate({"code": "abc"}, strict=True).code == "abc"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(?i)abc", "ECMA-262"),
        ("a)|(b", "ECMA-262"),
        ("abc\\", "ECMA-262"),
        ("a\\Z", "ECMA-262"),
        ("\\d+", "[0-9]"),
        ("\\w+", "[A-Za-z0-9_]"),
        ("\\bword", "explicit class"),
        ("\\p{L}+", "not read the same way"),
        ("(a)\\1", "not read the same way"),
        ("(?=a)a", "linear-time"),
        ("(?<!a)b", "linear-time"),
    ],
)
def test_patterns_engines_disagree_on_are_refused(pattern: str, why: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and why in problem


def _file(body: str) -> str:
    return "reports:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "  ") + "\n"


@pytest.fixture
def sqlite_service(sqlite_crm: CrmDb) -> Iterator[SqlService]:
    engine = SqlEngine(sqlite_crm.url)
    yield SqlService(engine, max_rows=100, timeout_s=5.0)
    engine.close()


def test_default_must_match_the_whole_pattern(sqlite_service: SqlService) -> None:
    with pytest.raises(ReportsError, match="default does not match pattern"):
        build_report_tools(
            _file(
                """
                - name: r
                  description: d
                  parameters:
                    code: {type: string, pattern: "[a-z]+", default: "abc1"}
                  sql: SELECT :code AS c
                """
            ),
            sqlite_service,
        )


@pytest.mark.parametrize(
    ("dialect", "params", "sql", "fragment"),
    [
        ("sqlite", "p: {type: string}", "SELECT v FROM t WHERE v LIKE :p", "declare it with like:"),
        ("sqlite", "p: {type: string}", "SELECT v FROM t WHERE v LIKE :p || '%'", "declare it with like:"),
        ("postgres", "p: {type: string}", "SELECT v FROM t WHERE v ILIKE '%' || :p", "declare it"),
        ("sqlite", "p: {type: string, like: prefix}", "SELECT v FROM t WHERE v LIKE :p || '%'", "whole"),
        ("sqlite", "p: {type: string, like: prefix}", "SELECT v FROM t WHERE v = :p", "may only be"),
        ("sqlite", "p: {type: string, like: prefix}", "SELECT v FROM t WHERE v LIKE :p ESCAPE '#'", "ESCAPE"),
        ("sqlite", "p: {type: string}", "SELECT v FROM t WHERE v GLOB :p", "GLOB"),
        ("sqlite", "p: {type: string}", "SELECT v FROM t WHERE t MATCH :p", "full-text"),
        ("postgres", "p: {type: string}", "SELECT v FROM t WHERE v ~ :p", "regular-expression"),
        ("postgres", "p: {type: string}", "SELECT v FROM t WHERE v ~* :p", "regular-expression"),
        ("postgres", "p: {type: string}", "SELECT v FROM t WHERE v SIMILAR TO :p", "SIMILAR TO"),
        ("postgres", "p: {type: string}", "SELECT v FROM t WHERE v LIKE ANY (ARRAY[:p])", "declare it"),
        ("postgres", "p: {type: string}", "SELECT regexp_replace(v, :p, '') AS w FROM t", "regular"),
        ("postgres", "p: {type: string}", "SELECT v FROM t WHERE d @@ to_tsquery(:p)", "full-text"),
        ("mysql", "p: {type: string}", "SELECT v FROM t WHERE v REGEXP :p", "regular-expression"),
        ("mysql", "p: {type: string}", "SELECT v FROM t WHERE v RLIKE :p", "regular-expression"),
        ("mysql", "p: {type: string}", "SELECT v FROM t WHERE MATCH(v) AGAINST (:p IN BOOLEAN MODE)", "full"),
        ("sqlite", "p: {type: integer, like: prefix}", "SELECT :p AS p", "like is one of"),
    ],
)
def test_parameters_in_pattern_positions_fail_the_load(
    dialect: str, params: str, sql: str, fragment: str
) -> None:
    from mcpkit.sql.reports.bind import BindError, prepare_sql
    from mcpkit.sql.reports.spec import parse_reports

    specs, problems = parse_reports(
        _file(f'- name: r\n  description: d\n  parameters:\n    {params}\n  sql: "{sql}"\n')
    )
    if problems.items:
        assert fragment in "\n".join(problems.items)
        return
    with pytest.raises(BindError, match=fragment.replace("*", r"\*")):
        prepare_sql(specs[0].sql, dialect, specs[0].params, limit=26)


def test_a_subject_parameter_is_fine_and_escape_is_added() -> None:
    from mcpkit.sql.reports.bind import prepare_sql
    from mcpkit.sql.reports.spec import parse_reports

    specs, _ = parse_reports(
        _file(
            """
            - name: r
              description: d
              parameters:
                s: {type: string}
                p: {type: string, like: suffix}
              sql: SELECT regexp_replace(:s, 'a+', 'b') AS w FROM t WHERE v ILIKE :p
            """
        )
    )
    bound = prepare_sql(specs[0].sql, "postgres", specs[0].params, limit=26)
    assert "ILIKE :p ESCAPE '!'" in bound.send


# --- through the real server, per engine -------------------------------------------------------------


def _probe_sqlite(tmp: Path) -> tuple[str, str]:
    path = tmp / "probe.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE probe (v TEXT NOT NULL)")
        db.executemany("INSERT INTO probe VALUES (?)", [(v,) for v in PROBE])
    db.close()
    return f"sqlite:///{path}", "probe"


@pytest.fixture
def probe_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL of a read-only account, probe table) on the engine the test is parametrized with."""
    dialect = request.param
    if dialect == "sqlite":
        yield _probe_sqlite(tmp_path)
        return
    db: CrmDb = request.getfixturevalue({"postgres": "pg_crm", "mysql": "mysql_crm"}[dialect])
    table = f"like_probe_{tokens.token_hex(3)}"
    if dialect == "postgres":
        with pg_admin(db.admin_url) as c:
            c.execute(f"CREATE TABLE {db.schema}.{table} (v VARCHAR(40) NOT NULL)")
            with c.cursor() as cur:
                cur.executemany(f"INSERT INTO {db.schema}.{table} VALUES (%s)", [(v,) for v in PROBE])
            c.execute(f"GRANT SELECT ON {db.schema}.{table} TO {db.role}")
        yield db.url, table
        with pg_admin(db.admin_url) as c:
            c.execute(f"DROP TABLE {db.schema}.{table}")
        return
    admin = mysql_admin(db.admin_url)
    try:
        with admin.cursor() as c:
            c.execute(f"CREATE TABLE {db.schema}.{table} (v VARCHAR(40) NOT NULL)")
            c.executemany(f"INSERT INTO {db.schema}.{table} VALUES (%s)", [(v,) for v in PROBE])
        admin.commit()
        yield db.url, table
        with admin.cursor() as c:
            c.execute(f"DROP TABLE {db.schema}.{table}")
    finally:
        admin.close()


def _rows(result: Any) -> list[str]:
    assert not result.is_error, result
    return [row[0] for row in result.structured_content["rows"]]


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "probe_db",
    ["sqlite", pytest.param("postgres"), pytest.param("mysql", marks=pytest.mark.mysql)],
    indirect=True,
)
async def test_wildcards_and_metacharacters_are_literals_through_the_real_server(
    probe_db: tuple[str, str], tmp_path: Path
) -> None:
    url, table = probe_db
    reports = tmp_path / "reports.yaml"
    reports.write_text(REPORTS.replace("{table}", table), encoding="utf-8")
    audit = tmp_path / "audit.db"
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", url, "--reports", str(reports), "--audit", str(audit)]
    args += UNBOUNDED_MEMORY
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}

        async def starting(prefix: str) -> list[str]:
            return _rows(await client.call_tool("starting_with", {"prefix": prefix}))

        async def containing(part: str) -> list[str]:
            return _rows(await client.call_tool("containing", {"part": part}))

        # LIKE wildcards and the escape character match only themselves ...
        assert await starting("%") == []
        assert await starting("_") == []
        assert await starting("50%") == ["50% off"]
        assert await starting("50_") == ["50_off"]
        assert await starting("5_") == ["5_00"]
        assert await containing("%") == ["50% off", "x%y"]
        assert await containing("!") == ["a!b"]
        assert await containing("\\") == ["a\\b"]
        assert await containing("!%") == []
        assert await containing("\\%") == []
        # ... and so do regex and GLOB metacharacters, which LIKE never had.
        assert await starting("Cust.*") == ["Cust.*|a"]
        assert await starting("[ab]") == ["[ab]c"]
        assert await starting(".*") == []
        # like: wildcards keeps the caller's % and _ (on purpose) and only the escape character literal
        matching = _rows(await client.call_tool("matching", {"pattern": "50%"}))
        assert set(matching) == {"50% off", "50_off", "50x off"}
        assert _rows(await client.call_tool("matching", {"pattern": "a!_"})) == ["a!b"]
        assert _rows(await client.call_tool("matching", {"pattern": "a!"})) == []
        # the pattern: the whole value, in the published schema and at the server
        code = listed["by_code"].input_schema["properties"]["code"]
        assert code["pattern"] == "^(?:[a-z]+)$"
        extra = {"keyword": "revenue", "author": "ann", "api_token": "tok-123456"}
        ok = await client.call_tool("by_code", {"code": "abc", **extra})
        assert _rows(ok) == ["abc"]
        for evil in ("Cust.*|a", "abc\n", "abc%", "a_c", "%"):
            refused = await client.call_tool("by_code", {"code": evil, **extra})
            assert _code(refused) == "INVALID_PARAMS", evil
    done = run_mcpkit("audit", "--audit", str(audit), "--tool", "by_code", "--tail", "1", "--format", "json")
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in done.stdout.splitlines()]
    arguments = json.loads(record["arguments"])
    # named like credentials, but not declared secret: recorded as sent; the declared secret is not
    assert arguments["keyword"] == "revenue" and arguments["author"] == "ann"
    assert arguments["api_token"] == "[REDACTED]"
    assert "tok-123456" not in done.stdout


SECRET_REPORTS = textwrap.dedent(
    """
    reports:
      - name: by_token
        description: Probe values equal to a secret token.
        parameters:
          token: {type: string, secret: true, max_length: 20}
        sql: SELECT v FROM {table} WHERE v = :token ORDER BY v
      - name: by_acct
        description: Probe values by a secret account number (out of range fails on the database).
        parameters:
          acct: {type: string, secret: true, pattern: "[0-9]{1,12}", default: "1"}
        sql: SELECT v FROM {table} WHERE CAST(:acct AS {int}) = 1 ORDER BY v
    """
)


@pytest.mark.anyio
@pytest.mark.parametrize("probe_db", ["sqlite", pytest.param("postgres")], indirect=True)
async def test_a_secret_parameter_never_reaches_the_operator_log(
    probe_db: tuple[str, str], tmp_path: Path
) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    url, table = probe_db
    reports = tmp_path / "reports.yaml"
    cast = "integer" if url.startswith("postgresql") else "INTEGER"
    reports.write_text(SECRET_REPORTS.replace("{table}", table).replace("{int}", cast), encoding="utf-8")
    audit = tmp_path / "audit.db"
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", url, "--reports", str(reports), "--audit", str(audit)]
    args += UNBOUNDED_MEMORY
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    errlog = tmp_path / "stderr.log"
    with errlog.open("w", encoding="utf-8") as err:
        async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert listed["by_token"].input_schema["properties"]["token"]["writeOnly"] is True
            assert not (await session.call_tool("by_token", {"token": "hunter2"})).is_error
            failed = await session.call_tool("by_acct", {"acct": "999999999999"})
    logged = errlog.read_text(encoding="utf-8")
    assert "by_token" in logged and "by_acct" in logged, logged  # the call log was captured
    if url.startswith("postgresql"):
        assert failed.is_error and "out of range" in logged, logged  # the database error was logged
    for line in logged.splitlines():
        assert "hunter2" not in line and "999999999999" not in line, line
    done = run_mcpkit("audit", "--audit", str(audit), "--format", "json")
    assert done.returncode == 0 and done.stdout.count("[REDACTED]") >= 2, done.stdout
    assert "hunter2" not in done.stdout and "999999999999" not in done.stdout


@pytest.mark.parametrize("probe_db", [pytest.param("postgres")], indirect=True)
def test_a_secret_parameter_never_reaches_the_operator_log_over_http(
    probe_db: tuple[str, str], tmp_path: Path
) -> None:
    import httpx2

    from tests.helpers import free_port, python_server

    url, table = probe_db
    reports = tmp_path / "reports.yaml"
    reports.write_text(SECRET_REPORTS.replace("{table}", table).replace("{int}", "integer"), encoding="utf-8")
    port = free_port()
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", url, "--reports", str(reports)]
    args += ["--audit", str(tmp_path / "audit.db"), "--transport", "http", "--port", str(port)]
    args += ["--stateless", "--json-response"]
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with python_server(args, port) as running:
        for i, (name, arguments) in enumerate(
            [("by_token", {"token": "hunter2"}), ("by_acct", {"acct": "999999999999"})]
        ):
            call = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
            assert (
                httpx2.post(
                    f"http://127.0.0.1:{port}/mcp", headers=headers, json=call, timeout=20
                ).status_code
                == 200
            )
        time.sleep(0.3)  # the call record is written once the answer is on its way
        logged = running.log()
    assert "by_acct" in logged and "out of range" in logged, logged
    assert "hunter2" not in logged and "999999999999" not in logged, logged
