"""Identities with real row-level security on PostgreSQL (and per-role logins on MariaDB).

Two principals see different rows of one table through the same query path (in process and over
Streamable HTTP with bearer tokens), and neither sees the other's rows with any query of the
admission attack corpus or a set of RLS-bypass attempts (SET ROLE, RESET ROLE, set_config,
SECURITY DEFINER functions, owner views, statistics, ...).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import jwt
import psycopg
import pymysql
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.context import Context
from mcpkit.errors import Refused
from mcpkit.pipeline import Call, CallNext
from mcpkit.result import Outcome
from mcpkit.sql.admission import Admitted, FunctionPolicy
from mcpkit.sql.checks import inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.identities import IdentityRouter, MysqlLogin, RoleMap, session_setup, verify_roles
from mcpkit.sql.models import QueryResult
from mcpkit.sql.profiles import PostgresCatalog
from mcpkit.sql.routing import SERVICE_KEY, SOURCE_KEY
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.testing import connect
from tests.helpers import ROOT, free_port, python_server, run_mcpkit, text_of
from tests.sql.sql_support import (
    READER_CONNECTIONS,
    load_corpus,
    mysql_scratch,
    pg_admin,
    pg_drop_schema_and_roles,
)


@dataclass(frozen=True)
class RlsDb:
    url: str  # the server's own account (NOINHERIT, member of both roles)
    schema: str
    emea: str
    amer: str


@pytest.fixture(scope="module")
def rls(pg_url: str) -> Iterator[RlsDb]:
    tag = secrets.token_hex(4)
    s, emea, amer, svc = f"mcpkit_rls_{tag}", f"mcpkit_emea_{tag}", f"mcpkit_amer_{tag}", f"mcpkit_svc_{tag}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {s}")
        c.execute(f"CREATE ROLE {emea} LOGIN")  # one login per principal's role
        c.execute(f"CREATE ROLE {amer} LOGIN")
        c.execute(f"CREATE ROLE {svc} LOGIN NOINHERIT")
        c.execute(f"GRANT {emea}, {amer} TO {svc}")
        c.execute(f"CREATE TABLE {s}.accounts (id int PRIMARY KEY, region text NOT NULL, note text NOT NULL)")
        for i in range(1, 21):
            region = "emea" if i % 2 else "amer"
            c.execute(f"INSERT INTO {s}.accounts VALUES (%s, %s, %s)", [i, region, f"{region}-secret-{i}"])
        c.execute(f"ALTER TABLE {s}.accounts ENABLE ROW LEVEL SECURITY")
        c.execute(f"CREATE POLICY p_emea ON {s}.accounts FOR SELECT TO {emea} USING (region = 'emea')")
        c.execute(f"CREATE POLICY p_amer ON {s}.accounts FOR SELECT TO {amer} USING (region = 'amer')")
        c.execute(f"GRANT USAGE ON SCHEMA {s} TO {emea}, {amer}, {svc}")
        c.execute(f"GRANT SELECT ON {s}.accounts TO {emea}, {amer}")
        # Bait: runs as its owner (the superuser), STABLE, executable by PUBLIC by default.
        c.execute(
            f"CREATE FUNCTION {s}.all_notes() RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER"
            f" AS $$ SELECT note FROM {s}.accounts $$"
        )
        # As `mcpkit sql grant` and the start-up check tell an operator; a test grants it back.
        c.execute(f"REVOKE EXECUTE ON FUNCTION {s}.all_notes() FROM PUBLIC")
        c.execute(f"CREATE VIEW {s}.owner_view AS SELECT * FROM {s}.accounts")  # owner bypasses RLS
        c.execute(
            f"CREATE VIEW {s}.invoker_view WITH (security_invoker = true) AS SELECT * FROM {s}.accounts"
        )
        c.execute(f"GRANT SELECT ON {s}.invoker_view TO {emea}, {amer}")
        c.execute(f"ANALYZE {s}.accounts")
        for role in (svc, emea, amer):
            c.execute(f"ALTER ROLE {role} SET search_path = {s}")
    url = make_url(pg_url).set(username=svc, password=None).render_as_string(hide_password=False)
    yield RlsDb(url, s, emea, amer)
    with pg_admin(pg_url) as c:
        pg_drop_schema_and_roles(c, s, [svc, emea, amer])


def _secrets(rls: RlsDb) -> dict[str, str]:
    """The secrets store of the role map's logins (trust authentication: no passwords)."""
    return {"EMEA_USER": rls.emea, "EMEA_PASSWORD": "", "AMER_USER": rls.amer, "AMER_PASSWORD": ""}


_LOGINS_YAML = (
    "logins:\n  {emea}: {{user: EMEA_USER, password: EMEA_PASSWORD}}\n"
    "  {amer}: {{user: AMER_USER, password: AMER_PASSWORD}}\n"
)


def _logins(rls: RlsDb) -> dict[str, MysqlLogin]:
    return {
        rls.emea: MysqlLogin("EMEA_USER", "EMEA_PASSWORD"),
        rls.amer: MysqlLogin("AMER_USER", "AMER_PASSWORD"),
    }


@pytest.fixture(scope="module")
def router(rls: RlsDb) -> Iterator[IdentityRouter]:
    engine = SqlEngine(rls.url)
    roles = RoleMap(
        principals={"alice": rls.emea, "bob": rls.amer}, groups={"amer-team": rls.amer}, logins=_logins(rls)
    )
    # all_notes is allowed by name, so what refuses it below is the SECURITY DEFINER check.
    functions = FunctionPolicy.for_dialect("postgres", extra=["all_notes"])
    r = IdentityRouter(
        SqlService(engine, timeout_s=3.0, max_rows=500, functions=functions), roles, secret=_secrets(rls).get
    )
    yield r
    r.close()
    engine.close()


def _ctx(principal: str | None) -> Context:
    return Context(
        call_id="rls", tool="execute_query", client=None, principal=principal, protocol_version="x"
    )


def _cells(result: QueryResult) -> list[str]:
    return [str(c) for row in result.rows for c in row]


def _outcome(service: SqlService, sql: str) -> QueryResult | str:
    try:
        return service.query(sql, call_id="rls-attack", max_rows=500)[0]
    except Refused as exc:
        return f"refused {(exc.data or {}).get('reason')}"
    except (QueryFailed, QueryTimeout) as exc:
        return f"failed {type(exc).__name__}"


def test_two_principals_see_different_rows_through_the_same_query(router: IdentityRouter) -> None:
    sql = "SELECT region, note FROM accounts ORDER BY id"
    alice = router.for_context(_ctx("alice")).query(sql, call_id="a")[0]
    bob = router.for_context(_ctx("bob")).query(sql, call_id="b")[0]
    team = router.service_for("carol", groups=["amer-team"]).query(sql, call_id="c")[0]
    assert {r[0] for r in alice.rows} == {"emea"} and alice.row_count == 10
    assert {r[0] for r in bob.rows} == {"amer"} and bob.row_count == 10
    assert team.rows == bob.rows


def test_unmapped_and_anonymous_callers_are_refused(router: IdentityRouter, rls: RlsDb) -> None:
    for principal in ("mallory", None):
        with pytest.raises(Refused) as caught:
            router.for_context(_ctx(principal))
        assert caught.value.data == {"reason": "no_role"} and "mallory" not in caught.value.message
    with pytest.raises(Refused):
        RoleMap(groups={"a": rls.emea, "b": rls.amer}).role_for("x", groups=["a", "b"])  # ambiguous


def test_the_account_itself_sees_nothing(router: IdentityRouter) -> None:
    assert _outcome(router.template, "SELECT note FROM accounts") == "failed QueryFailed"


BYPASS = [
    "SET ROLE {other}",
    "RESET ROLE",
    "SET SESSION AUTHORIZATION DEFAULT",
    "SELECT set_config('role', '{other}', true)",
    "SELECT set_config('row_security', 'off', true)",
    "COMMIT; SET ROLE {other}; SELECT note FROM accounts",
    "SELECT * FROM all_notes()",
    "SELECT {schema}.all_notes()",
    "SELECT * FROM owner_view",
    "SELECT * FROM invoker_view",
    "SELECT most_common_vals::text, histogram_bounds::text FROM pg_stats WHERE tablename = 'accounts'",
    "SELECT note FROM accounts WHERE region <> (SELECT current_setting('role'))",
    "SELECT * FROM ONLY accounts TABLESAMPLE BERNOULLI (100)",
    "WITH x AS MATERIALIZED (SELECT * FROM accounts) SELECT * FROM x",
    "SELECT (SELECT string_agg(note, ',') FROM {schema}.accounts)",
    "SELECT query_to_xml('SELECT * FROM accounts', true, true, '')",
    "SELECT * FROM accounts FOR UPDATE",
    "EXPLAIN SELECT * FROM accounts",
    "SELECT note FROM accounts WHERE note LIKE '%' || (SELECT 'secret')",
]


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_no_query_reaches_the_other_principals_rows(router: IdentityRouter, rls: RlsDb, who: str) -> None:
    mine, theirs = ("emea", "amer") if who == "alice" else ("amer", "emea")
    other_role = rls.amer if who == "alice" else rls.emea
    service = router.for_context(_ctx(who))
    cases = [c.sql for c in load_corpus("postgres.sql")] + [c.sql for c in load_corpus("legit.sql")]
    cases += [b.replace("{other}", other_role) for b in BYPASS]
    answered = 0
    for sql in cases:
        text = sql.replace("{schema}", rls.schema).replace("{canary}", "/tmp/mcpkit-rls-canary")
        outcome = _outcome(service, text)
        if isinstance(outcome, QueryResult):
            answered += 1
            leaked = [c for c in _cells(outcome) if f"{theirs}-secret" in c]
            assert leaked == [], text
    assert answered >= 5
    assert _cells(service.query("SELECT note FROM invoker_view", call_id="v")[0])[0].startswith(
        f"{mine}-secret"
    )


def test_security_definer_functions_are_refused_and_would_leak(
    router: IdentityRouter, rls: RlsDb, pg_url: str
) -> None:
    alice = router.for_context(_ctx("alice"))
    with pg_admin(pg_url) as c:
        c.execute(f"GRANT EXECUTE ON FUNCTION {rls.schema}.all_notes() TO PUBLIC")
    try:
        # The start-up check refuses a role that can run it, naming the REVOKE that fixes it.
        assert isinstance(alice.engine, SqlEngine)
        found = [f.line() for f in inspect_account(alice.engine).findings]
        assert any(
            f"function {rls.schema}.all_notes() runs as its owner" in f
            and f"REVOKE EXECUTE ON FUNCTION {rls.schema}.all_notes() FROM PUBLIC" in f
            for f in found
        ), found
        assert _outcome(alice, "SELECT * FROM all_notes()") == "refused volatile_function"
        # The same role without the definer check: the function reads past row-level security.
        plain = SqlService(
            alice.engine, timeout_s=3.0, catalog=PostgresCatalog(alice.engine), functions=alice.functions
        )
        leaked = _outcome(plain, "SELECT * FROM all_notes()")
        assert isinstance(leaked, QueryResult) and any("amer-secret" in c for c in _cells(leaked))
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"REVOKE EXECUTE ON FUNCTION {rls.schema}.all_notes() FROM PUBLIC")


def test_verify_roles(router: IdentityRouter, rls: RlsDb) -> None:
    assert verify_roles(router.base, router.roles) == []
    bad = RoleMap(principals={"a": "postgres", "b": "mcpkit_no_such_role"})
    problems = verify_roles(router.base, bad)
    assert any("bypasses row-level security" in p for p in problems)
    assert any("does not exist" in p for p in problems)


def test_role_map_file(tmp_path: Path) -> None:
    path = tmp_path / "roles.yaml"
    path.write_text(
        "principals:\n  alice@example.com: analyst_emea\ngroups:\n  amer-team: analyst_amer\n"
        "mysql:\n  analyst_emea: {user: EMEA_USER, password: EMEA_PASSWORD}\n",
        encoding="utf-8",
    )
    roles = RoleMap.from_yaml(path)
    assert roles.role_for("alice@example.com") == "analyst_emea"
    assert roles.logins["analyst_emea"].password == "EMEA_PASSWORD"
    path.write_text('principals:\n  alice: analyst\n  bob: "x; DROP ROLE y"\n', encoding="utf-8")
    with pytest.raises(SqlConfigError, match=r"roles.yaml:3: the role of 'bob' must be a plain role name"):
        RoleMap.from_yaml(path)
    with pytest.raises(SqlConfigError):
        session_setup("postgres", 'a"; RESET ROLE; --')
    with pytest.raises(SqlConfigError):
        session_setup("sqlite", "analyst")


def _serve_args(rls: RlsDb, roles: Path, *more: str) -> list[str]:
    """`mcpkit sql serve` as an operator runs it, with a role map (the arguments after `mcpkit`)."""
    return ["sql", "serve", "--dsn", rls.url, "--role-map", str(roles), "--no-audit", *more]


async def _regions_over_http(url: str, bearer: str) -> object:
    """What one caller gets for the same query: its rows, or the error code."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool(
            "execute_query", {"query": "SELECT DISTINCT region FROM accounts ORDER BY region"}
        )
    if result.is_error:
        return (result.meta or {})["mcpkit/error"]["code"]
    return QueryResult.model_validate(result.structured_content).rows


@pytest.mark.anyio
async def test_over_http_with_bearer_tokens(rls: RlsDb, tmp_path: Path) -> None:
    roles, tokens = tmp_path / "roles.yaml", tmp_path / "tokens"
    roles.write_text(
        f"principals:\n  alice: {rls.emea}\n  bob: {rls.amer}\n"
        + _LOGINS_YAML.format(emea=rls.emea, amer=rls.amer),
        encoding="utf-8",
    )
    token = {p: f"{p}-token-{secrets.token_hex(12)}" for p in ("alice", "bob", "carol")}
    tokens.write_text("".join(f"{p} {t}\n" for p, t in token.items()), encoding="utf-8")
    port = free_port()
    args = _serve_args(rls, roles, "--transport", "http", "--port", str(port), "--tokens", str(tokens))
    with python_server(["-m", "mcpkit", *args], port, env=_secrets(rls)):
        seen = {p: await _regions_over_http(f"http://127.0.0.1:{port}/mcp", token[p]) for p in token}
    assert seen == {"alice": [["emea"]], "bob": [["amer"]], "carol": "REFUSED"}


@pytest.mark.anyio
async def test_jwt_groups_pick_the_role(rls: RlsDb, tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "ES256"}]}), encoding="utf-8")
    roles = tmp_path / "roles.yaml"
    roles.write_text(
        f"principals:\n  bob: {rls.amer}\ngroups:\n  emea-team: {rls.emea}\n  amer-team: {rls.amer}\n"
        + _LOGINS_YAML.format(emea=rls.emea, amer=rls.amer),
        encoding="utf-8",
    )
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = "https://idp.example.com"
    args = _serve_args(rls, roles, "--transport", "http", "--port", str(port))
    args += ["--jwt-issuer", issuer, "--jwks", str(jwks), "--resource-url", resource]
    args += ["--jwt-groups-claim", "roles"]

    def mint(sub: str, groups: object) -> str:
        claims = {"iss": issuer, "aud": resource, "sub": sub, "exp": int(time.time()) + 300, "roles": groups}
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})

    callers = {
        "dana": ["emea-team", "unrelated"],  # one mapped group
        "erin": "amer-team",  # a space-separated string claim
        "bob": ["emea-team"],  # a principal's own mapping wins over its groups
        "frank": ["emea-team", "amer-team"],  # two roles: ambiguous, refused
        "gil": [],  # nothing mapped
    }
    with python_server(["-m", "mcpkit", *args], port, env=_secrets(rls)):
        seen = {who: await _regions_over_http(resource, mint(who, g)) for who, g in callers.items()}
    assert seen == {
        "dana": [["emea"]],
        "erin": [["amer"]],
        "bob": [["amer"]],
        "frank": "REFUSED",
        "gil": "REFUSED",
    }


@pytest.mark.anyio
async def test_stdio_runs_as_the_configured_account(rls: RlsDb, tmp_path: Path) -> None:
    roles = tmp_path / "roles.yaml"
    roles.write_text(
        f"principals:\n  alice: {rls.emea}\n" + _LOGINS_YAML.format(emea=rls.emea, amer=rls.amer),
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpkit", *_serve_args(rls, roles)],
        cwd=str(ROOT),
        env={**os.environ, **_secrets(rls)},
    )
    async with Client(params) as client:
        result = await client.call_tool("execute_query", {"query": "SELECT current_user AS who"})
    assert not result.is_error, text_of(result)
    # No caller to map over stdio: not refused, and no role taken on, the account itself.
    assert QueryResult.model_validate(result.structured_content).rows == [[make_url(rls.url).username]]


def test_role_map_over_http_needs_authentication(rls: RlsDb, tmp_path: Path) -> None:
    roles = tmp_path / "roles.yaml"
    roles.write_text(f"principals:\n  alice: {rls.emea}\n", encoding="utf-8")
    proc = run_mcpkit(*_serve_args(rls, roles, "--transport", "http", "--port", str(free_port())))
    assert proc.returncode == 2, proc.stderr
    assert "--role-map over HTTP needs --tokens or --jwt-issuer" in proc.stderr


@pytest.mark.mysql
def test_mysql_uses_per_role_logins(mysql_url: str) -> None:
    tag = secrets.token_hex(4)
    db, user_a, user_b = f"mcpkit_id_{tag}", f"mcpkit_ida_{tag}", f"mcpkit_idb_{tag}"
    u = make_url(mysql_url)
    admin = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.t_a (x int)")
        c.execute(f"CREATE TABLE {db}.t_b (x int)")
        c.execute(f"INSERT INTO {db}.t_a VALUES (1)")
        c.execute(f"INSERT INTO {db}.t_b VALUES (2)")
        for user, table in ((user_a, "t_a"), (user_b, "t_b")):
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{tag}' WITH {limit}")
            c.execute(f"GRANT SELECT ON {db}.{table} TO '{user}'@'%'")
    engine = SqlEngine(u.set(database=db))
    roles = RoleMap(
        principals={"alice": "role_a", "bob": "role_b"},
        logins={"role_a": _login("A"), "role_b": _login("B")},
    )
    env = {"A_USER": user_a, "A_PASSWORD": f"pw-{tag}", "B_USER": user_b, "B_PASSWORD": f"pw-{tag}"}
    router = IdentityRouter(SqlService(engine, timeout_s=5.0), roles, secret=env.get)
    try:
        alice, bob = router.service_for("alice"), router.service_for("bob")
        assert alice.query("SELECT x FROM t_a", call_id="a")[0].rows == [[1]]
        assert bob.query("SELECT x FROM t_b", call_id="b")[0].rows == [[2]]
        assert _outcome(alice, "SELECT x FROM t_b") == "failed QueryFailed"
        assert _outcome(bob, "SELECT x FROM t_a") == "failed QueryFailed"
        with pytest.raises(Refused):
            router.service_for("mallory")
    finally:
        router.close()
        engine.close()
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
            c.execute(f"DROP USER '{user_a}'@'%'")
            c.execute(f"DROP USER '{user_b}'@'%'")
        admin.close()


@pytest.mark.mysql
def test_two_roles_that_log_in_as_one_user_are_refused(mysql_url: str) -> None:
    # a copy-paste slip in the logins: alice's role logs in with bob's credentials, and start-up
    # said ok while alice read bob's rows (red team v10 F7)
    roles = RoleMap(
        principals={"alice": "role_a", "bob": "role_b"},
        logins={"role_a": _login("B"), "role_b": _login("B")},
    )
    engine = SqlEngine(mysql_url)
    router = IdentityRouter(SqlService(engine, timeout_s=5.0), roles, secret={"B_USER": "bob"}.get)
    try:
        with pytest.raises(SqlConfigError, match="roles role_a and role_b log in as the same user bob"):
            router.verify()
    finally:
        router.close()
        engine.close()


def test_postgres_refuses_a_role_that_logs_in_as_the_servers_own_account(rls: RlsDb) -> None:
    # red team my11 F6 on PostgreSQL: the emea role's login is the DSN's own account
    engine = SqlEngine(rls.url)
    account = str(make_url(rls.url).username)
    roles = RoleMap(principals={"alice": rls.emea, "bob": rls.amer}, logins=_logins(rls))
    env = {**_secrets(rls), "EMEA_USER": account}
    router = IdentityRouter(SqlService(engine, timeout_s=3.0), roles, secret=env.get)
    try:
        with pytest.raises(
            SqlConfigError, match=f"role {rls.emea} logs in as the server's own account {account}"
        ):
            router.verify()
    finally:
        router.close()
        engine.close()


@pytest.mark.mysql
def test_a_role_that_logs_in_as_the_servers_own_account_is_refused(mysql_url: str) -> None:
    # copy-pasted credentials: bob's role logs in as the DSN's account, which reads every tenant's
    # table, and start-up said ok while bob read alice's rows (red team my11 F6)
    with mysql_scratch(mysql_url, "f6") as scratch:  # its reader is the DSN's account
        dsn_user, user_a = scratch.reader, f"{scratch.reader}a"
        with scratch.admin.cursor() as c:
            c.execute(f"CREATE TABLE {scratch.db}.t_alice (x varchar(20))")
            c.execute(f"INSERT INTO {scratch.db}.t_alice VALUES ('ALICE-ONLY')")
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{user_a}'@'%' IDENTIFIED BY 'pw' WITH {limit}")
            for user in (dsn_user, user_a):
                c.execute(f"GRANT SELECT ON {scratch.db}.t_alice TO '{user}'@'%'")
        engine = SqlEngine(scratch.reader_url)
        roles = RoleMap(
            principals={"alice": "role_a", "bob": "role_b"},
            logins={"role_a": _login("A"), "role_b": _login("B")},
        )
        env = {"A_USER": user_a, "A_PASSWORD": "pw", "B_USER": dsn_user, "B_PASSWORD": "pw"}
        router = IdentityRouter(SqlService(engine, timeout_s=5.0), roles, secret=env.get)
        try:
            # what the finding is about: bob's login is the DSN's account and reads alice's table
            bob = router.service_for("bob")
            assert bob.query("SELECT x FROM t_alice", call_id="b")[0].rows == [["ALICE-ONLY"]]
            who = bob.query("SELECT CURRENT_USER() AS u", call_id="w")[0].rows
            assert who == [[f"{dsn_user}@%"]]
            with pytest.raises(
                SqlConfigError, match=f"role role_b logs in as the server's own account {dsn_user}@%"
            ):
                router.verify()
        finally:
            router.close()
            engine.close()
            with scratch.admin.cursor() as c:
                c.execute(f"DROP USER '{user_a}'@'%'")


def _login(prefix: str) -> MysqlLogin:
    return MysqlLogin(f"{prefix}_USER", f"{prefix}_PASSWORD")


ESCAPE = (
    "SELECT set_config('role', '{other}', true) || query_to_xml("
    "'SELECT string_agg(note, '','') AS n FROM {schema}.accounts', false, false, '')::text AS leaked"
)


def _need_xml(pg_url: str) -> None:
    """ESCAPE runs its SQL through query_to_xml: without libxml (a minimal build) it fails whatever
    the role map does, and a test of the escape would pass for nothing."""
    with pg_admin(pg_url) as c:
        try:
            c.execute("SELECT xmlparse(content '<a/>')")
        except psycopg.errors.FeatureNotSupported:
            pytest.skip("the server is built without libxml (query_to_xml), which ESCAPE needs")


def _raw(service: SqlService) -> SqlService:
    """The same role with admission switched off: a query that could run arbitrary SQL."""
    raw = SqlService(service.engine, timeout_s=3.0, catalog=None)
    raw._admit = lambda sql, dialect, **_: Admitted(sql=sql, tree=exp.Select())  # type: ignore[method-assign]
    return raw


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_the_role_map_holds_even_against_arbitrary_sql(
    router: IdentityRouter, rls: RlsDb, who: str, pg_url: str
) -> None:
    _need_xml(pg_url)
    theirs, other = ("amer", rls.amer) if who == "alice" else ("emea", rls.emea)
    raw = _raw(router.for_context(_ctx(who)))
    for sql in (ESCAPE, f"SET ROLE {other}", "RESET ROLE", "SET SESSION AUTHORIZATION DEFAULT"):
        outcome = _outcome(raw, sql.format(other=other, schema=rls.schema))
        assert not isinstance(outcome, QueryResult) or not any(
            f"{theirs}-secret" in c for c in _cells(outcome)
        )
        if sql.startswith(("SELECT", "SET ROLE")):  # the others only return to the login itself
            assert outcome == "failed QueryFailed", sql


def test_a_shared_login_is_what_arbitrary_sql_escapes(rls: RlsDb, pg_url: str) -> None:
    """What --allow shared-login gives up: the service account may switch to any mapped role."""
    _need_xml(pg_url)
    engine = SqlEngine(rls.url)
    roles = RoleMap(principals={"alice": rls.emea, "bob": rls.amer})
    shared = IdentityRouter(SqlService(engine, timeout_s=3.0), roles, shared_login=True)
    try:
        raw = _raw(shared.service_for("alice"))
        leaked = _outcome(raw, ESCAPE.format(other=rls.amer, schema=rls.schema))
        assert isinstance(leaked, QueryResult) and "amer-secret" in _cells(leaked)[0]
        with pytest.raises(SqlConfigError, match="no login for role"):
            IdentityRouter(SqlService(engine, timeout_s=3.0), roles)
    finally:
        shared.close()
        engine.close()


def test_start_up_refuses_a_login_that_can_switch_to_another_principal(
    router: IdentityRouter, rls: RlsDb, pg_url: str
) -> None:
    router.verify()
    with pg_admin(pg_url) as c:
        c.execute(f"GRANT {rls.amer} TO {rls.emea}")
    try:
        with pytest.raises(SqlConfigError, match=f"can switch to {rls.amer}.*REVOKE"):
            router.verify()
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"REVOKE {rls.amer} FROM {rls.emea}")


@pytest.mark.anyio
async def test_identity_routing_is_middleware_that_composes_with_the_users(rls: RlsDb) -> None:
    """The role a call runs as is picked by the public middleware chain: a user's middleware outside
    it (here one that authenticates callers, one that keeps a quota, one that looks) composes."""
    engine = SqlEngine(rls.url)
    roles = RoleMap(principals={"alice": rls.emea, "bob": rls.amer}, logins=_logins(rls))
    router = IdentityRouter(SqlService(engine, timeout_s=5.0), roles, secret=_secrets(rls).get)
    who = ["alice"]
    seen: list[tuple[str | None, object, object]] = []
    used: dict[str | None, int] = {}

    async def authenticate(call: Call, call_next: CallNext) -> Outcome:
        call.principal = who[0]  # e.g. from a header the user's own gateway checked
        return await call_next(call)

    async def quota(call: Call, call_next: CallNext) -> Outcome:
        used[call.principal] = used.get(call.principal, 0) + 1
        if used[call.principal] > 2:
            raise Refused("Your quota for today is spent.", data={"reason": "quota"})
        return await call_next(call)

    async def look(call: Call, call_next: CallNext) -> Outcome:
        try:
            return await call_next(call)
        finally:  # routing ran inside: the state says where the call went
            service = call.state.get(SERVICE_KEY)
            seen.append((call.principal, call.state.get(SOURCE_KEY), getattr(service, "engine", None)))

    server = build_server(
        SqlService(engine, timeout_s=5.0), router=router, middleware=[authenticate, quota, look]
    )
    sql = {"query": "SELECT DISTINCT region FROM accounts"}
    try:
        async with connect(server) as client:
            alice = await client.call_tool("execute_query", sql)
            who[0] = "bob"
            bob = await client.call_tool("execute_query", sql)
            who[0] = "mallory"
            mallory = await client.call_tool("execute_query", sql)
            who[0] = "alice"
            await client.call_tool("execute_query", sql)
            over = await client.call_tool("execute_query", sql)
    finally:
        router.close()
        engine.close()
    assert (alice.structured_content or {})["rows"] == [["emea"]], text_of(alice)
    assert (bob.structured_content or {})["rows"] == [["amer"]], text_of(bob)
    assert (mallory.meta or {})["mcpkit/error"]["code"] == "REFUSED"  # no role: refused by routing
    assert "quota" in text_of(over)
    # the quota refused the fifth call before it reached the routing (look sits inside the quota)
    assert [s[:2] for s in seen] == [(p, "default") for p in ("alice", "bob", "mallory", "alice")]
    engines = [s[2] for s in seen]
    assert engines[0] is not None and engines[0] is not engines[1]  # each role its own login
    assert engines[0] is engines[3] and engines[2] is None  # mallory: refused, no database


def test_start_up_refuses_a_login_one_set_role_from_another_tenants_table(
    router: IdentityRouter, rls: RlsDb, pg_url: str
) -> None:
    """Red team mask17 F6: a login NOINHERIT-member of an unmapped group role that reads another
    tenant's table passed start-up (only inherited privileges were counted); one `SET ROLE` read it."""
    group, s = f"{rls.schema}_grp", rls.schema
    router.verify()
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE TABLE {s}.amer_projects (id int, code text)")
        c.execute(f"INSERT INTO {s}.amer_projects VALUES (1, 'PROJ-AMER-SECRET')")
        c.execute(f"CREATE ROLE {group} NOLOGIN")
        c.execute(f"GRANT USAGE ON SCHEMA {s} TO {group}")
        c.execute(f"GRANT SELECT ON {s}.amer_projects TO {group}")
        # NOINHERIT first: from PostgreSQL 16 it is only the default of the grants made after it
        c.execute(f"ALTER ROLE {rls.emea} NOINHERIT")
        c.execute(f"GRANT {group} TO {rls.emea}, {rls.amer}")
    try:
        login = make_url(pg_url).set(username=rls.emea, password=None, drivername="postgresql")
        with psycopg.connect(login.render_as_string(hide_password=False), autocommit=True) as c:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(f"SELECT code FROM {s}.amer_projects")
            c.execute(f"SET ROLE {group}")  # what the check must count: the table is one SET ROLE away
            assert c.execute(f"SELECT code FROM {s}.amer_projects").fetchall() == [("PROJ-AMER-SECRET",)]
        with pytest.raises(
            SqlConfigError, match=f'can SET ROLE to {group}.*REVOKE {group} FROM "{rls.emea}"'
        ):
            router.verify()
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"ALTER ROLE {rls.emea} INHERIT")
            c.execute(f"DROP TABLE IF EXISTS {s}.amer_projects")
            c.execute(f"DROP OWNED BY {group}")
            c.execute(f"DROP ROLE IF EXISTS {group}")
    router.verify()
