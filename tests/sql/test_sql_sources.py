"""Several databases in one server (`--dsn NAME=URL`): SQLite, PostgreSQL and MariaDB side by side,
each with its own account, masks and role map, through the official client over Streamable HTTP;
one database's outage fails only its calls, start-up checks name the database they refuse, and
every audit record carries its source."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.engine import make_url

from mcpkit import Context, Tool, ToolAnnotations, ToolResult
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, SqlConfigError
from mcpkit.sql.models import QueryResult
from mcpkit.sql.routing import Source, SourceRouter, service_of, source_of
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.sql.sources import load_sources
from mcpkit.testing import connect
from tests.helpers import ROOT, free_port, python_server, run_mcpkit, text_of
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin, pg_admin, pg_drop_schema_and_roles

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class World:
    pg: str  # the PostgreSQL source's own account (column grants, no RLS policy: sees no accounts)
    pg_wide: str  # an account that can read the masked column (for the start-up refusal)
    maria: str
    lite: str
    scratch: str  # a PostgreSQL database created (and dropped) by the test itself
    scratch_db: str
    scratch_role: str
    admin: str
    env: dict[str, str]  # the role maps' login secrets
    tag: str


@pytest.fixture(scope="module")
def world(pg_url: str, mysql_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tag = secrets.token_hex(4)
    s = f"mk_src_{tag}"
    svc, wide, emea, amer, scr = (f"mk_src_{p}_{tag}" for p in ("svc", "wide", "emea", "amer", "scr"))
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {s}")
        for role in (svc, wide, emea, amer, scr):
            c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"CREATE TABLE {s}.accounts (id int PRIMARY KEY, region text NOT NULL)")
        c.execute(
            f"INSERT INTO {s}.accounts SELECT i, CASE WHEN i % 2 = 0 THEN 'amer' ELSE 'emea' END"
            " FROM generate_series(1, 6) i"
        )
        c.execute(f"ALTER TABLE {s}.accounts ENABLE ROW LEVEL SECURITY")
        c.execute(f"CREATE POLICY p_emea ON {s}.accounts FOR SELECT TO {emea} USING (region = 'emea')")
        c.execute(f"CREATE POLICY p_amer ON {s}.accounts FOR SELECT TO {amer} USING (region = 'amer')")
        c.execute(f"CREATE TABLE {s}.people (id int PRIMARY KEY, name text, email text)")
        c.execute(f"INSERT INTO {s}.people VALUES (1, 'ada', 'ada@pg.example'), (2, 'bob', 'bob@pg.example')")
        c.execute(f"GRANT USAGE ON SCHEMA {s} TO {svc}, {wide}, {emea}, {amer}")
        c.execute(f"GRANT SELECT ON {s}.accounts TO {svc}, {emea}, {amer}")
        c.execute(f"GRANT SELECT (id, name) ON {s}.people TO {svc}, {emea}, {amer}")
        c.execute(f"GRANT SELECT ON {s}.people TO {wide}")
        for role in (svc, wide, emea, amer):
            c.execute(f"ALTER ROLE {role} SET search_path = {s}")
    db, ma, mb, mbase = f"mk_src_{tag}", f"mk_srca_{tag}", f"mk_srcb_{tag}", f"mk_srcm_{tag}"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.orders (id int PRIMARY KEY, customer varchar(20), card varchar(20))")
        c.execute(f"INSERT INTO {db}.orders VALUES (1, 'acme', '4111-1111'), (2, 'globex', '5500-0000')")
        c.execute(f"CREATE TABLE {db}.stock (id int PRIMARY KEY, item varchar(20))")
        c.execute(f"INSERT INTO {db}.stock VALUES (1, 'bolts')")
        for user in (ma, mb, mbase):
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{tag}' WITH {limit}")
        for user in (ma, mbase):
            c.execute(f"GRANT SELECT (id, customer) ON {db}.orders TO '{user}'@'%'")
        c.execute(f"GRANT SELECT ON {db}.stock TO '{mb}'@'%', '{mbase}'@'%'")
    lite = tmp_path_factory.mktemp("sources") / "events.db"
    with sqlite3.connect(lite) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, secret TEXT)")
        conn.execute("INSERT INTO events VALUES (1, 'login', 'hunter2'), (2, 'logout', 'swordfish')")
        conn.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, email TEXT)")  # not masked here
        conn.execute("INSERT INTO contacts VALUES (1, 'ada@lite.example')")
    conn.close()
    pg = make_url(pg_url)
    maria = make_url(mysql_url).set(username=mbase, password=f"pw-{tag}", database=db)
    scratch_db = f"mk_srcdb_{tag}"
    env = {
        "PG_EMEA_USER": emea,
        "PG_EMEA_PASSWORD": "",
        "PG_AMER_USER": amer,
        "PG_AMER_PASSWORD": "",
        "MA_A_USER": ma,
        "MA_A_PASSWORD": f"pw-{tag}",
        "MA_B_USER": mb,
        "MA_B_PASSWORD": f"pw-{tag}",
    }
    yield World(
        pg=pg.set(username=svc, password=None).render_as_string(False),
        pg_wide=pg.set(username=wide, password=None).render_as_string(False),
        maria=maria.render_as_string(False),
        lite=f"sqlite:///{lite}",
        scratch=pg.set(username=scr, password=None, database=scratch_db).render_as_string(False),
        scratch_db=scratch_db,
        scratch_role=scr,
        admin=pg_url,
        env=env,
        tag=tag,
    )
    _drop_scratch(pg_url, scratch_db)
    with pg_admin(pg_url) as c:
        roles = [svc, wide, emea, amer, scr]
        pg_drop_schema_and_roles(c, s, roles)
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE {db}")
        for user in (ma, mb, mbase):
            c.execute(f"DROP USER '{user}'@'%'")
    admin.close()


def _create_scratch(w: World) -> None:
    with pg_admin(w.admin) as c:
        c.execute(f"CREATE DATABASE {w.scratch_db}")
    admin_there = make_url(w.admin).set(database=w.scratch_db).render_as_string(False)
    with pg_admin(admin_there) as c:
        c.execute("CREATE TABLE t (x int)")
        c.execute("INSERT INTO t VALUES (42)")
        c.execute(f"GRANT SELECT ON t TO {w.scratch_role}")


def _drop_scratch(admin_url: str, name: str) -> None:
    with pg_admin(admin_url) as c:
        c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        c.execute(f"DROP DATABASE IF EXISTS {name}")


def _files(w: World, folder: Path) -> dict[str, Path]:
    files = {
        "pg-masks": "masks:\n  - '*.email'\n",
        "lite-masks": "masks:\n  - events.secret\n",
        "maria-masks": "masks:\n  - orders.card\n",
        "pg-roles": f"principals:\n  alice: {w.env['PG_EMEA_USER']}\n  bob: {w.env['PG_AMER_USER']}\n"
        f"logins:\n  {w.env['PG_EMEA_USER']}: {{user: PG_EMEA_USER, password: PG_EMEA_PASSWORD}}\n"
        f"  {w.env['PG_AMER_USER']}: {{user: PG_AMER_USER, password: PG_AMER_PASSWORD}}\n",
        "maria-roles": "principals:\n  alice: role_a\n  bob: role_b\n"
        "logins:\n  role_a: {user: MA_A_USER, password: MA_A_PASSWORD}\n"
        "  role_b: {user: MA_B_USER, password: MA_B_PASSWORD}\n",
        "tokens": "".join(f"{p} {p}-token-{w.tag}\n" for p in ("alice", "bob", "carol")),
    }
    out = {}
    for name, text in files.items():
        path = folder / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        out[name] = path
    return out


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


class Caller:
    """One principal's session with the server (bearer token)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    async def __call__(self, tool: str, **arguments: Any) -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        async with http, Client(streamable_http_client(self.url, http_client=http), mode="legacy") as client:
            return await client.call_tool(tool, arguments)

    async def tools(self) -> list[Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        async with http, Client(streamable_http_client(self.url, http_client=http), mode="legacy") as client:
            return list((await client.list_tools()).tools)


def _rows(result: Any) -> Any:
    assert not result.is_error, text_of(result)
    return result.structured_content["rows"]


async def test_three_engines_one_server_with_an_outage(world: World, tmp_path: Path) -> None:
    files = _files(world, tmp_path)
    closed = free_port()  # nothing listens there: refused at once
    port = free_port()
    audit = tmp_path / "audit.db"
    args = ["-m", "mcpkit", "sql", "serve", "--transport", "http", "--port", str(port)]
    args += ["--tokens", str(files["tokens"]), "--audit", str(audit)]
    args += ["--dsn", f"pg={world.pg}", "--dsn", f"maria={world.maria}", "--dsn", f"lite={world.lite}"]
    args += ["--dsn", f"down=postgresql://postgres@127.0.0.1:{closed}/test"]
    args += ["--dsn", f"scratch={world.scratch}"]  # its database does not exist yet
    args += ["--mask", f"pg={files['pg-masks']}", "--mask", f"lite={files['lite-masks']}"]
    args += ["--mask", f"maria={files['maria-masks']}"]
    args += ["--role-map", f"pg={files['pg-roles']}", "--role-map", f"maria={files['maria-roles']}"]
    url = f"http://127.0.0.1:{port}/mcp"
    alice, bob = Caller(url, f"alice-token-{world.tag}"), Caller(url, f"bob-token-{world.tag}")
    with python_server(args, port, env=world.env) as running:
        tools = {t.name: t for t in await alice.tools()}
        query_schema = tools["execute_query"].input_schema
        assert query_schema["properties"]["source"]["enum"] == ["pg", "maria", "lite", "down", "scratch"]
        assert "source" in query_schema["required"]
        assert "source" in tools["describe_table"].input_schema["required"]
        assert "source" not in tools["list_tables"].input_schema.get("required", [])

        listed = await alice("list_tables")
        assert not listed.is_error, text_of(listed)
        by_source = {s["source"]: s for s in listed.structured_content["sources"]}
        assert {n: s["available"] for n, s in by_source.items()} == {
            "pg": True,
            "maria": True,
            "lite": True,
            "down": False,
            "scratch": False,
        }
        assert {"accounts", "people"} <= {t["name"] for t in by_source["pg"]["tables"]}
        assert {t["name"] for t in by_source["lite"]["tables"]} == {"events", "contacts"}
        assert "## source down (PostgreSQL)" in text_of(listed)
        one = await bob("list_tables", source="maria")
        assert not one.is_error, (text_of(one), one.meta)
        assert [s["source"] for s in one.structured_content["sources"]] == ["maria"]
        described = await alice("describe_table", source="lite", table="events")
        assert [c["name"] for c in described.structured_content["columns"]] == ["id", "kind", "secret"]

        # per-source role maps: the same query, each caller its own rows (PostgreSQL RLS) ...
        regions = "SELECT DISTINCT region FROM accounts"
        assert _rows(await alice("execute_query", source="pg", query=regions)) == [["emea"]]
        assert _rows(await bob("execute_query", source="pg", query=regions)) == [["amer"]]
        # ... and its own login (MariaDB grants)
        orders = "SELECT id, customer FROM orders ORDER BY id"
        assert _rows(await alice("execute_query", source="maria", query=orders)) == [
            [1, "acme"],
            [2, "globex"],
        ]
        denied = await bob("execute_query", source="maria", query=orders)
        # with masks on, every failure of the read reads as one sentence (red team rtB F3)
        assert _code(denied) == "TOOL_ERROR" and "not told apart" in text_of(denied)
        assert _rows(await bob("execute_query", source="maria", query="SELECT item FROM stock")) == [
            ["bolts"]
        ]
        # carol has a role on no database with a role map: refused there, served where there is none
        carol = Caller(url, f"carol-token-{world.tag}")
        assert _code(await carol("execute_query", source="pg", query=regions)) == "REFUSED"
        counted = await carol("execute_query", source="lite", query="SELECT count(*) FROM events")
        assert _rows(counted) == [[2]]

        # per-source masks: PostgreSQL masks *.email, SQLite events.secret (not its contacts.email)
        people = await alice("execute_query", source="pg", query="SELECT name, email FROM people ORDER BY id")
        assert _rows(people) == [["ada", "<masked>"], ["bob", "<masked>"]]
        events = await alice(
            "execute_query", source="lite", query="SELECT kind, secret FROM events ORDER BY id"
        )
        assert _rows(events) == [["login", "<masked>"], ["logout", "<masked>"]]
        contacts = await alice("execute_query", source="lite", query="SELECT email FROM contacts")
        assert _rows(contacts) == [["ada@lite.example"]]
        by_secret = "SELECT id FROM events WHERE secret = 'hunter2'"
        assert _code(await alice("execute_query", source="lite", query=by_secret)) == "REFUSED"
        card = await alice("execute_query", source="maria", query="SELECT card FROM orders")
        # masked on MariaDB too: the column reads <masked>, and the account holds no grant on it
        assert "4111" not in json.dumps(card.structured_content or {}) + text_of(card)
        assert _rows(card) == [["<masked>"], ["<masked>"]]

        # a database that never answered: its calls fail, naming it; the others answer
        down = await alice("execute_query", source="down", query="SELECT 1")
        assert _code(down) == "TOOL_ERROR"
        assert "'down' is not reachable right now" in text_of(down)
        assert str(closed) not in text_of(down) and "postgres" not in text_of(down).lower()
        assert (down.meta or {})["mcpkit/error"]["data"]["reason"] == "connection"
        assert _code(await alice("describe_table", source="down", table="x")) == "TOOL_ERROR"

        # scratch did not exist at start-up; once it does, its start-up checks run and it serves
        missing = await alice("execute_query", source="scratch", query="SELECT x FROM t")
        assert "'scratch' is not reachable" in text_of(missing)
        _create_scratch(world)
        time.sleep(5.5)  # the deferred checks are retried at most every 5 s
        assert _rows(await alice("execute_query", source="scratch", query="SELECT x FROM t")) == [[42]]
        # then its database goes away mid-life: only its calls fail
        _drop_scratch(world.admin, world.scratch_db)
        gone = await alice("execute_query", source="scratch", query="SELECT x FROM t")
        assert _code(gone) == "TOOL_ERROR" and "'scratch' is not reachable" in text_of(gone), text_of(gone)
        assert world.scratch_db not in text_of(gone)
        assert _rows(await bob("execute_query", source="pg", query=regions)) == [["amer"]]
        assert _rows(await alice("execute_query", source="lite", query="SELECT count(*) FROM events")) == [
            [2]
        ]

        # the source is checked like any argument
        assert _code(await alice("execute_query", source="nope", query="SELECT 1")) == "INVALID_PARAMS"
        assert _code(await alice("execute_query", query="SELECT 1")) == "INVALID_PARAMS"
        log = running.log()
    assert "source down did not answer at start-up" in log
    assert "source scratch answered and passed its start-up checks" in log

    done = run_mcpkit("audit", "--audit", str(audit), "--format", "json")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    sources = [r["source"] for r in records if r["tool"] == "execute_query"]
    assert {"pg", "maria", "lite", "down", "scratch"} <= set(sources)
    assert [r["source"] for r in records if r["tool"] == "list_tables"] == ["*", "maria"]
    down = [r for r in records if r["source"] == "down"]
    assert down and all(r["outcome"] == "TOOL_ERROR" and r["reason"] == "connection" for r in down)
    no_role = [r for r in records if r["principal"] == "carol" and r["source"] == "pg"]
    assert [(r["outcome"], r["reason"]) for r in no_role] == [("REFUSED", "no_role")]


def test_start_up_checks_run_per_database_and_name_the_one_that_failed(world: World, tmp_path: Path) -> None:
    files = _files(world, tmp_path)
    base = ["sql", "serve", "--no-audit", "--dsn", f"lite={world.lite}"]
    admin = run_mcpkit(*base, "--dsn", f"admin={world.admin}")
    assert admin.returncode == 2, admin.stderr
    assert "source admin:" in admin.stderr and "superuser" in admin.stderr
    wide = run_mcpkit(*base, "--dsn", f"wide={world.pg_wide}", "--mask", f"wide={files['pg-masks']}")
    assert wide.returncode == 2, wide.stderr
    assert "source wide: --mask: the database account can read masked columns" in wide.stderr
    unnamed = run_mcpkit(*base, "--mask", str(files["pg-masks"]), "--dsn", f"pg={world.pg}")
    assert unnamed.returncode == 2 and "name the database it is for" in unnamed.stderr
    plain = run_mcpkit("sql", "serve", "--no-audit", "--dsn", world.lite, "--dsn", world.pg)
    assert plain.returncode == 2 and "name each one: --dsn NAME=URL" in plain.stderr


def test_doctor_covers_each_database(world: World) -> None:
    closed = free_port()
    done = run_mcpkit(
        "sql", "doctor", "--dsn", f"lite={world.lite}", "--dsn", f"down=postgresql://u@127.0.0.1:{closed}/x"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lite, down = done.stdout.split("source down (PostgreSQL)")
    assert lite.startswith("source lite (SQLite)") and "ok   reachable" in lite and "fail" not in lite
    assert "fail reachable" in down


async def test_one_database_keeps_the_tool_schemas_small(world: World) -> None:
    """A single database, named or not, lists exactly what the server always listed: no source."""
    engine = SqlEngine(world.lite)
    service = SqlService(engine, timeout_s=5.0)
    try:
        async with connect(build_server(service)) as client:
            plain = [t.model_dump() for t in (await client.list_tools()).tools]
        named = build_server(SourceRouter([Source("events", "sqlite", service)]))
        async with connect(named) as client:
            one = [t.model_dump() for t in (await client.list_tools()).tools]
            answer = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM events"})
    finally:
        engine.close()
    assert one == plain
    assert all("source" not in t["input_schema"]["properties"] for t in one)
    assert _rows(answer) == [[2]]


def _sqlite(path: Path, rows: list[tuple[int, str, str]]) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, secret TEXT)")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
    conn.close()
    return f"sqlite:///{path}"


def _report(name: str, kind: str) -> str:
    return (
        "version: 1\nreports:\n"
        f"  - name: {name}\n    title: Count\n    description: How many {kind} events there are.\n"
        f"    sql: SELECT count(*) AS n FROM events WHERE kind = '{kind}'\n"
    )


async def test_a_sources_file_names_each_database_and_its_files(tmp_path: Path) -> None:
    a = _sqlite(tmp_path / "a.db", [(1, "login", "hunter2")])
    b = _sqlite(tmp_path / "b.db", [(1, "logout", "swordfish"), (2, "login", "letmein"), (3, "login", "x")])
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "a-masks.yaml").write_text("masks:\n  - events.secret\n", encoding="utf-8")
    (conf / "a-reports.yaml").write_text(_report("alpha_logins", "login"), encoding="utf-8")
    (conf / "b-reports.yaml").write_text(_report("beta_logouts", "logout"), encoding="utf-8")
    sources = conf / "sources.yaml"
    sources.write_text(
        f"sources:\n  alpha:\n    dsn: {a}\n    mask: a-masks.yaml\n    reports: a-reports.yaml\n"
        "  beta:\n    dsn_env: MK_BETA_DSN\n    reports: b-reports.yaml\n",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpkit", "sql", "serve", "--no-audit", "--sources", str(sources)],
        cwd=str(ROOT),
        env={**os.environ, "MK_BETA_DSN": b},
    )
    sql = "SELECT kind, secret FROM events ORDER BY id"
    async with Client(params, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        alpha = await client.call_tool("execute_query", {"source": "alpha", "query": sql})
        beta = await client.call_tool("execute_query", {"source": "beta", "query": sql})
        logins = await client.call_tool("alpha_logins", {})
        logouts = await client.call_tool("beta_logouts", {})
    assert _rows(alpha) == [["login", "<masked>"]]  # alpha's masks ...
    assert _rows(beta)[:2] == [["logout", "swordfish"], ["login", "letmein"]]  # ... are not beta's
    # each report runs on the database whose file defined it, and takes no source
    assert "source" not in tools["alpha_logins"].input_schema.get("properties", {})
    assert _rows(logins) == [[1]] and _rows(logouts) == [[1]]  # beta has 2 logins, alpha no logout

    sources.write_text("sources:\n  alpha:\n    dsn: x\n  beta:\n    url: y\n", encoding="utf-8")
    with pytest.raises(SqlConfigError, match=r"sources.yaml:4: source beta: keys are .* \(not 'url'\)"):
        load_sources(sources)
    sources.write_text("sources:\n  alpha:\n    dsn_env: MK_UNSET_DSN\n", encoding="utf-8")
    with pytest.raises(SqlConfigError, match=r"sources\.yaml:2: source alpha: the variable MK_UNSET_DSN"):
        load_sources(sources, environ={})
    sources.write_text("sources:\n  'bad name':\n    dsn: x\n", encoding="utf-8")
    with pytest.raises(SqlConfigError, match=r"sources\.yaml:2: source name 'bad name'"):
        load_sources(sources)


async def test_a_database_that_comes_back_is_checked_before_it_serves(tmp_path: Path) -> None:
    """The deferred start-up checks: unreachable -> retried; refused by a check -> stays refused."""
    engine = SqlEngine(_sqlite(tmp_path / "a.db", [(1, "login", "x")]))
    later = SqlEngine(_sqlite(tmp_path / "b.db", [(1, "logout", "y")]))
    attempts: list[str] = []

    def flaky() -> tuple[SqlService, None]:
        attempts.append("flaky")
        if len(attempts) == 1:
            raise QueryFailed("connection")
        return SqlService(later, timeout_s=5.0), None

    def unsafe() -> tuple[SqlService, None]:
        raise SqlConfigError("the database account holds what a read-only server must not")

    flaky_source = Source("flaky", "sqlite", prepare=flaky)
    routing = SourceRouter(
        [
            Source("main", "sqlite", SqlService(engine, timeout_s=5.0)),
            flaky_source,
            Source("unsafe", "postgres", prepare=unsafe),
        ]
    )
    sql = "SELECT kind FROM events"
    try:
        async with connect(build_server(routing)) as client:

            async def ask(source: str) -> Any:
                return await client.call_tool("execute_query", {"source": source, "query": sql})

            first = await ask("flaky")
            again = await ask("flaky")  # within 5 s of the failed attempt: not retried
            flaky_source._next_try = 0.0  # as if 5 s had passed
            back = await ask("flaky")
            refused = await ask("unsafe")
            main = await ask("main")
    finally:
        routing.close()
    assert "'flaky' is not reachable right now" in text_of(first) and text_of(again) == text_of(first)
    assert attempts == ["flaky", "flaky"]
    assert _rows(back) == [["logout"]]
    assert "'unsafe' is not served: it failed this server's safety checks" in text_of(refused)
    assert "read-only server must not" not in text_of(refused)  # the why is for the operator
    assert (refused.meta or {})["mcpkit/error"]["data"]["reason"] == "source_refused"
    assert _rows(main) == [["login"]]


class CountInput(BaseModel):
    """Arguments of event_count."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["login", "logout"] = Field(description="The kind of event.")


def _event_count(args: CountInput, ctx: Context) -> ToolResult:
    service = service_of(ctx)  # the routing picked the database (and the caller's role)
    result, text = service.query(
        f"SELECT count(*) AS n, '{source_of(ctx)}' AS source FROM events WHERE kind = '{args.kind}'",
        call_id=ctx.call_id,
    )
    return ToolResult(text=text, structured=result)


async def test_a_tool_of_your_own_gets_source_routing_for_free(tmp_path: Path) -> None:
    a = SqlEngine(_sqlite(tmp_path / "a.db", [(1, "login", "x")]))
    b = SqlEngine(_sqlite(tmp_path / "b.db", [(1, "login", "y"), (2, "login", "z")]))
    count = Tool(
        name="event_count",
        description="How many events of one kind there are.",
        input=CountInput,
        output=QueryResult,
        handler=_event_count,
        annotations=ToolAnnotations(read_only_hint=True),
    )
    several = SourceRouter(
        [Source("alpha", "sqlite", SqlService(a, timeout_s=5.0)), Source("beta", "sqlite", SqlService(b))]
    )
    try:
        async with connect(build_server(several, tools=[count])) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            alpha = await client.call_tool("event_count", {"source": "alpha", "kind": "login"})
            beta = await client.call_tool("event_count", {"source": "beta", "kind": "login"})
            missing = await client.call_tool("event_count", {"kind": "login"})
        async with connect(build_server(SqlService(a, timeout_s=5.0), tools=[count])) as client:
            one = {t.name: t for t in (await client.list_tools()).tools}
            only = await client.call_tool("event_count", {"kind": "login"})
    finally:
        a.close()
        b.close()
    schema = listed["event_count"].input_schema
    assert schema["properties"]["source"]["enum"] == ["alpha", "beta"] and "source" in schema["required"]
    assert _rows(alpha) == [[1, "alpha"]] and _rows(beta) == [[2, "beta"]]
    assert _code(missing) == "INVALID_PARAMS"
    assert "source" not in one["event_count"].input_schema["properties"]
    assert _rows(only) == [[1, "default"]]


def test_query_takes_the_source_to_run_on(tmp_path: Path) -> None:
    a = _sqlite(tmp_path / "a.db", [(1, "login", "x")])
    b = _sqlite(tmp_path / "b.db", [(1, "logout", "y")])
    both = ("sql", "query", "--dsn", f"alpha={a}", "--dsn", f"beta={b}")
    picked = run_mcpkit(*both, "--source", "beta", "SELECT kind FROM events")
    assert picked.returncode == 0 and "logout" in picked.stdout, picked.stderr
    unnamed = run_mcpkit(*both, "SELECT kind FROM events")
    assert unnamed.returncode == 2 and "--source (alpha, beta)" in unnamed.stderr
