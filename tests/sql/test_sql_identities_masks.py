"""Every identity calls run as is checked like the server's account (red team 10b, B1 and L1).

The logins of `--role-map` carry the caller's rights, so `--mask` must hold for each of them: a
login with a whole-table grant read masked values through a security_invoker view, while start-up
had only checked the DSN's service account. And a login that is a member of the service account
inherits its grants and the row-level security policies written for it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.engine import make_url

from mcpkit.sql.assemble import prepare_masks
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.identities import IdentityRouter, RoleMap
from mcpkit.sql.service import Masking, SqlService
from tests.helpers import ROOT, free_port, python_server
from tests.sql.sql_support import READER_CONNECTIONS, mysql_admin, pg_admin, pg_drop_schema_and_roles

# Fingerprints the whole server (roles, databases, settings): runs after the parallel part.
pytestmark = pytest.mark.serial

SSN = "111-11-1111"


@dataclass(frozen=True)
class Db:
    url: str  # the service account
    admin: str
    emea: str
    amer: str
    env: dict[str, str]  # the role map's login secrets


def _files(tmp_path: Path, db: Db) -> tuple[Path, Path]:
    masks, roles = tmp_path / "masks.yaml", tmp_path / "roles.yaml"
    masks.write_text("masks:\n  - customers.ssn\n", encoding="utf-8")
    roles.write_text(
        f"principals:\n  alice: {db.emea}\n  bob: {db.amer}\n"
        f"logins:\n  {db.emea}: {{user: EMEA_USER, password: EMEA_PASSWORD}}\n"
        f"  {db.amer}: {{user: AMER_USER, password: AMER_PASSWORD}}\n",
        encoding="utf-8",
    )
    return masks, roles


@pytest.fixture
def pg(pg_url: str) -> Iterator[Db]:
    """A tenant table with RLS; the service account is granted the unmasked columns, the logins
    (carelessly) the whole table, and a security_invoker view reads the masked column."""
    tag = secrets.token_hex(4)
    s, svc, emea, amer = (
        f"mk_idmask_{tag}",
        f"mk_idmask_svc_{tag}",
        f"mk_idmask_e_{tag}",
        f"mk_idmask_a_{tag}",
    )
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE SCHEMA {s}")
        for role in (svc, emea, amer):
            c.execute(f"CREATE ROLE {role} LOGIN")
            c.execute(f"ALTER ROLE {role} SET search_path = {s}")
        c.execute(f"CREATE TABLE {s}.customers (id int PRIMARY KEY, name text, ssn text, tenant text)")
        c.execute(
            f"INSERT INTO {s}.customers VALUES (1, 'Ann', '{SSN}', '{emea}'),"
            f" (2, 'Bob', '222-22-2222', '{amer}')"
        )
        c.execute(f"ALTER TABLE {s}.customers ENABLE ROW LEVEL SECURITY")
        c.execute(f"CREATE POLICY tenant_rows ON {s}.customers USING (tenant = current_user)")
        c.execute(
            f"CREATE VIEW {s}.customer_contacts WITH (security_invoker = true)"
            f" AS SELECT id, name, ssn, tenant FROM {s}.customers"
        )
        c.execute(f"GRANT USAGE ON SCHEMA {s} TO {svc}, {emea}, {amer}")
        c.execute(f"GRANT SELECT (id, name, tenant) ON {s}.customers TO {svc}")
        c.execute(f"GRANT SELECT ON {s}.customers TO {emea}, {amer}")
        c.execute(f"GRANT SELECT ON {s}.customer_contacts TO {svc}, {emea}, {amer}")
    url = make_url(pg_url).set(username=svc, password=None).render_as_string(hide_password=False)
    env = {"EMEA_USER": emea, "EMEA_PASSWORD": "", "AMER_USER": amer, "AMER_PASSWORD": ""}
    yield Db(url, pg_url, emea, amer, env)
    with pg_admin(pg_url) as c:
        pg_drop_schema_and_roles(c, s, [svc, emea, amer])


def _withhold_from_logins(db: Db) -> None:
    """What the refusal tells the operator to run: the logins get the unmasked columns only."""
    with pg_admin(db.admin) as c:
        for login in (db.emea, db.amer):
            c.execute(f"REVOKE SELECT ON {_schema(db)}.customers FROM {login}")
            c.execute(f"GRANT SELECT (id, name, tenant) ON {_schema(db)}.customers TO {login}")


def _serve(db: Db, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`serve` over HTTP with bearer tokens, as far as its start-up checks."""
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789abcdef\n", encoding="utf-8")
    http = ["--transport", "http", "--port", str(free_port()), "--tokens", str(tokens)]
    return subprocess.run(
        [sys.executable, "-m", "mcpkit", "sql", "serve", "--dsn", db.url, "--no-audit", *http, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **db.env},
        check=False,
    )


def _doctor(db: Db, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpkit", "sql", "doctor", "--dsn", db.url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **db.env},
        check=False,
    )


def test_serve_refuses_a_role_map_login_that_can_read_a_masked_column(pg: Db, tmp_path: Path) -> None:
    masks, roles = _files(tmp_path, pg)
    ran = _serve(pg, tmp_path, "--mask", str(masks), "--role-map", str(roles))
    assert ran.returncode == 2, ran.stderr
    for login in (pg.emea, pg.amer):
        assert f"role {login}:" in ran.stderr
        assert f"FROM {login}" in ran.stderr  # the REVOKE for that login
    assert "ssn" in ran.stderr


def test_doctor_reports_each_role_map_login_and_its_masks(pg: Db, tmp_path: Path) -> None:
    masks, roles = _files(tmp_path, pg)
    ran = _doctor(pg, "--mask", str(masks), "--role-map", str(roles))
    assert ran.returncode != 0, ran.stdout
    failed = [line for line in ran.stdout.splitlines() if line.startswith("fail") and "masks" in line]
    assert {pg.emea, pg.amer} <= {w.rstrip(":") for line in failed for w in line.split()}, ran.stdout
    _withhold_from_logins(pg)
    ran = _doctor(pg, "--mask", str(masks), "--role-map", str(roles))
    assert "ok   masks per role" in ran.stdout, ran.stdout


async def _ask(url: str, bearer: str, sql: str) -> str:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool("execute_query", {"query": sql})
    return repr(result.content) + repr(result.structured_content)


@pytest.mark.anyio
async def test_once_withheld_the_view_returns_no_masked_value_over_http(pg: Db, tmp_path: Path) -> None:
    """The red team's read (an invoker view, filtered on the masked column) after the fix lines ran."""
    masks, roles = _files(tmp_path, pg)
    _withhold_from_logins(pg)
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789abcdef\n", encoding="utf-8")
    port = free_port()
    args = ["sql", "serve", "--dsn", pg.url, "--no-audit", "--mask", str(masks), "--role-map", str(roles)]
    args += ["--transport", "http", "--port", str(port), "--tokens", str(tokens)]
    with python_server(["-m", "mcpkit", *args], port, env=pg.env):
        url = f"http://127.0.0.1:{port}/mcp"
        seen = await _ask(
            url, "alice-token-0123456789abcdef", "SELECT id, ssn FROM customer_contacts WHERE ssn LIKE '1%'"
        )
        rows = await _ask(url, "alice-token-0123456789abcdef", "SELECT name FROM customers")
    assert SSN not in seen
    assert "Ann" in rows and "Bob" not in rows  # the login's own rows, served


def test_the_per_identity_check_can_run_again_while_serving(pg: Db, tmp_path: Path) -> None:
    from mcpkit.sql.maskcheck import identity_mask_findings, masks_verify

    masks, roles = _files(tmp_path, pg)
    _withhold_from_logins(pg)
    engine = SqlEngine(pg.url)
    try:
        policy, reflection, masked = prepare_masks(engine, str(masks))
        masking = Masking(policy, reflection.known(engine), masked)
        router = IdentityRouter(SqlService(engine, catalog=None), RoleMap.from_yaml(roles), secret=pg.env.get)
        assert identity_mask_findings(router, masking) == []
        with pg_admin(pg.admin) as c:  # a grant made after start-up
            c.execute(f"GRANT SELECT ON {_schema(pg)}.customers TO {pg.amer}")
        found = identity_mask_findings(router, masking)
        assert [role for role, _ in found] == [pg.amer]
        # the same check in one session, the shape a re-verification while serving calls
        check = masks_verify(masking)
        for role, login in router.identities():
            with login.session(10.0, "again") as (conn, _):
                if role == pg.amer:
                    with pytest.raises(SqlConfigError, match=f"REVOKE SELECT ON .*customers FROM {pg.amer}"):
                        check(login, conn)
                else:
                    check(login, conn)
    finally:
        engine.close()


def _schema(db: Db) -> str:
    return f"mk_idmask_{db.emea.rsplit('_', 1)[1]}"


def test_a_login_that_is_a_member_of_the_service_account_is_refused(pg: Db, tmp_path: Path) -> None:
    """L1: a login created IN ROLE <the service account> inherits its grants and its RLS policies."""
    _, roles = _files(tmp_path, pg)
    svc = make_url(pg.url).username
    with pg_admin(pg.admin) as c:
        c.execute(f"CREATE POLICY svc_all ON {_schema(pg)}.customers TO {svc} USING (true)")
        c.execute(f"GRANT {svc} TO {pg.emea}")
    ran = _serve(pg, tmp_path, "--role-map", str(roles))
    assert ran.returncode == 2, ran.stderr
    assert f"the login of {pg.emea} is a member of the server's account" in ran.stderr
    assert f'REVOKE "{svc}" FROM "{pg.emea}"' in ran.stderr
    # and the operator is told which policy the membership reaches
    assert f"the login of {pg.emea} is a member of {svc}, which a row-level security policy" in ran.stderr


def test_mariadb_role_map_logins_are_checked_for_masked_columns(mysql_url: str, tmp_path: Path) -> None:
    tag = secrets.token_hex(4)
    db, svc, emea, amer = f"mk_idmask_{tag}", f"mk_idm_s_{tag}", f"mk_idm_e_{tag}", f"mk_idm_a_{tag}"
    admin = mysql_admin(mysql_url)
    try:
        with admin.cursor() as c:
            c.execute(f"CREATE DATABASE {db}")
            c.execute(f"CREATE TABLE {db}.customers (id int PRIMARY KEY, name varchar(20), ssn varchar(20))")
            c.execute(f"INSERT INTO {db}.customers VALUES (1, 'Ann', '{SSN}')")
            c.execute(
                f"CREATE SQL SECURITY INVOKER VIEW {db}.customer_contacts"
                f" AS SELECT id, ssn FROM {db}.customers"
            )
            for user in (svc, emea, amer):
                c.execute(
                    f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{tag}'"
                    f" WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
                )
            c.execute(f"GRANT SELECT (id, name) ON {db}.customers TO '{svc}'@'%'")
            for user in (emea, amer):
                c.execute(f"GRANT SELECT ON {db}.customers TO '{user}'@'%'")
        url = make_url(mysql_url).set(username=svc, password=f"pw-{tag}", database=db)
        env = {
            "EMEA_USER": emea,
            "EMEA_PASSWORD": f"pw-{tag}",
            "AMER_USER": amer,
            "AMER_PASSWORD": f"pw-{tag}",
        }
        case = Db(url.render_as_string(hide_password=False), mysql_url, "role_e", "role_a", env)
        masks, roles = _files(tmp_path, case)
        ran = _serve(case, tmp_path, "--mask", str(masks), "--role-map", str(roles))
        assert ran.returncode == 2, ran.stderr
        assert "role role_e:" in ran.stderr and "role role_a:" in ran.stderr, ran.stderr
        assert f"'{emea}'" in ran.stderr
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {db}")
            for user in (svc, emea, amer):
                c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


async def _report(url: str, bearer: str) -> list[list[object]] | str:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        result = await client.call_tool("customer_names", {})
    if result.is_error:
        return str((result.meta or {}).get("mcpkit/error", {}).get("code"))
    return list((result.structured_content or {}).get("rows", []))


@pytest.mark.anyio
async def test_a_cached_report_is_keyed_on_the_whole_subject_and_the_role(pg: Db, tmp_path: Path) -> None:
    """Red team 10b B2: JWT subjects sharing their first 128+ characters, and one subject whose
    tokens carry groups that map to different roles, got each other's cached report rows."""
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "ES256"}]}), encoding="utf-8")
    prefix = "system:serviceaccount:" + "reporting-" * 12 + ":agent-"
    long_sub = prefix + "mapped"  # a principals: entry longer than 128 characters
    roles = tmp_path / "roles.yaml"
    roles.write_text(
        f"principals:\n  '{long_sub}': {pg.amer}\ngroups:\n  emea-team: {pg.emea}\n  amer-team: {pg.amer}\n"
        f"logins:\n  {pg.emea}: {{user: EMEA_USER, password: EMEA_PASSWORD}}\n"
        f"  {pg.amer}: {{user: AMER_USER, password: AMER_PASSWORD}}\n",
        encoding="utf-8",
    )
    reports = tmp_path / "reports.yaml"
    reports.write_text(
        "version: 1\nreports:\n  - name: customer_names\n    title: Customer names\n"
        "    description: Every customer's name, for questions such as who our customers are.\n"
        "    sql: SELECT name FROM customers ORDER BY name\n    cache_ttl_s: 300\n",
        encoding="utf-8",
    )
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = "https://idp.example.com"
    args = [
        "sql",
        "serve",
        "--dsn",
        pg.url,
        "--no-audit",
        "--role-map",
        str(roles),
        "--reports",
        str(reports),
    ]
    args += ["--transport", "http", "--port", str(port)]
    args += ["--jwt-issuer", issuer, "--jwks", str(jwks), "--resource-url", resource]

    def mint(sub: str, groups: list[str]) -> str:
        claims = {"iss": issuer, "aud": resource, "sub": sub, "exp": int(time.time()) + 300, "groups": groups}
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})

    with python_server(["-m", "mcpkit", *args], port, env=pg.env):
        seen = {
            "emea subject": await _report(resource, mint(prefix + "emea", ["emea-team"])),
            "amer subject": await _report(resource, mint(prefix + "amer", ["amer-team"])),
            "bot as emea": await _report(resource, mint("report-bot", ["emea-team"])),
            "bot as amer": await _report(resource, mint("report-bot", ["amer-team"])),
            "long principal": await _report(resource, mint(long_sub, [])),
        }
    assert seen == {
        "emea subject": [["Ann"]],
        "amer subject": [["Bob"]],
        "bot as emea": [["Ann"]],
        "bot as amer": [["Bob"]],
        "long principal": [["Bob"]],
    }
