"""Red team 10, F3 and F4: the role map's isolation and the masks' withholding are verified again while
serving, not only at start-up.

Before: the re-verification while serving ran only the account check. Under --role-map (one login
per role) `GRANT alice_role TO bob_role` moved the fingerprint, bob's login passed the account check,
and bob's next call read alice's rows; under --mask a `GRANT SELECT ON` the whole table (the grant
start-up refuses) went unnoticed and the engine no longer withheld the masked column.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy.engine import make_url

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.assemble import equip, open_service
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.identities import IdentityRouter, RoleMap
from mcpkit.sql.service import SqlService
from tests.helpers import free_port, python_server, text_of
from tests.sql.sql_support import (
    READER_CONNECTIONS,
    UNBOUNDED_MEMORY,
    PgScratch,
    mysql_admin,
    pg_admin,
    pg_scratch,
    serving_masked,
)

pytestmark = pytest.mark.anyio


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


@asynccontextmanager
async def _caller(url: str, token: str) -> AsyncIterator[Callable[[str], Any]]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:

        async def ask(sql: str) -> Any:
            return await client.call_tool("execute_query", {"query": sql})

        yield ask


@contextmanager
def _role_map_server(
    dsn: str, tmp_path: Path, logins: dict[str, tuple[str, str | None]], *more: str
) -> Iterator[tuple[str, dict[str, str]]]:
    """`mcpkit sql serve` over HTTP with bearer tokens and a role map: principal -> (its role, its
    login user, or None: the DSN's account switches to the role); yields the URL and the tokens."""
    roles, tokens = tmp_path / "roles.yaml", tmp_path / "tokens"
    env: dict[str, str] = {}
    lines = ["principals:"] + [f"  {p}: {role}" for p, (role, _) in logins.items()] + ["logins:"]
    for p, (role, user) in logins.items():
        if user is not None:
            lines.append(f"  {role}: {{user: {p.upper()}_USER, password: {p.upper()}_PW}}")
            env |= {f"{p.upper()}_USER": user, f"{p.upper()}_PW": "pw"}
    if lines[-1] == "logins:":
        lines.pop()
    roles.write_text("\n".join(lines) + "\n", encoding="utf-8")
    token = {p: f"{p}-{secrets.token_hex(12)}" for p in logins}
    tokens.write_text("".join(f"{p} {t}\n" for p, t in token.items()), encoding="utf-8")
    port = free_port()
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", dsn, "--role-map", str(roles), "--no-audit"]
    args += ["--transport", "http", "--port", str(port), "--tokens", str(tokens)]
    args += ["--catalog-check-interval", "0", *more]
    with python_server(args, port, env=env):
        yield f"http://127.0.0.1:{port}/mcp", token


async def test_postgres_role_granted_to_another_principals_login_while_serving(
    pg_url: str, tmp_path: Path
) -> None:
    with pg_scratch(pg_url, "rvid") as db:
        alice, bob = f"{db.reader}_a", f"{db.reader}_b"
        for login in (alice, bob):
            db.admin.execute(f"CREATE ROLE {login} LOGIN PASSWORD 'pw' CONNECTION LIMIT {READER_CONNECTIONS}")
        try:
            db.admin.execute("CREATE TABLE alice_t (secret text)")
            db.admin.execute("INSERT INTO alice_t VALUES ('alice-only-secret')")
            db.admin.execute("CREATE TABLE bob_t (x int)")
            db.admin.execute(f"GRANT SELECT ON alice_t TO {alice}")
            db.admin.execute(f"GRANT SELECT ON bob_t TO {bob}")
            logins: dict[str, tuple[str, str | None]] = {"alice": (alice, alice), "bob": (bob, bob)}
            with _role_map_server(db.reader_url, tmp_path, logins) as (url, token):
                async with _caller(url, token["alice"]) as a, _caller(url, token["bob"]) as b:
                    assert "alice-only-secret" in text_of(await a("SELECT secret FROM public.alice_t"))
                    assert _code(await b("SELECT secret FROM public.alice_t")) != "OK"
                    db.admin.execute(f"GRANT {alice} TO {bob}")
                    try:
                        refused = await b("SELECT secret FROM public.alice_t")
                        assert _code(refused) == "SOURCE_UNVERIFIED"
                        assert "alice-only-secret" not in text_of(refused) and alice not in text_of(refused)
                        assert _code(await b("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"
                        # only the principals whose login fails are refused
                        assert "alice-only-secret" in text_of(await a("SELECT secret FROM public.alice_t"))
                    finally:
                        db.admin.execute(f"REVOKE {alice} FROM {bob}")
                    assert _code(await b("SELECT count(*) AS n FROM public.bob_t")) == "OK"
        finally:
            _drop_logins(db, pg_url, alice, bob)


async def test_postgres_shared_login_role_granted_to_another_principals_role_while_serving(
    pg_url: str, tmp_path: Path
) -> None:
    # --allow shared-login: the account switches to each caller's role; one mapped role made a
    # member of another (inheriting its grants) is refused at start-up and now while serving.
    with pg_scratch(pg_url, "rvsh") as db:
        alice, bob = f"{db.reader}_a", f"{db.reader}_b"
        db.admin.execute(f"ALTER ROLE {db.reader} NOINHERIT")
        for role in (alice, bob):
            db.admin.execute(f"CREATE ROLE {role}")
        try:
            db.admin.execute(f"GRANT {alice}, {bob} TO {db.reader}")
            db.admin.execute("CREATE TABLE alice_t (secret text)")
            db.admin.execute("INSERT INTO alice_t VALUES ('alice-only-secret')")
            db.admin.execute(f"GRANT SELECT ON alice_t TO {alice}")
            logins: dict[str, tuple[str, str | None]] = {"alice": (alice, None), "bob": (bob, None)}
            shared = ("--allow", "shared-login")
            with _role_map_server(db.reader_url, tmp_path, logins, *shared) as (url, token):
                async with _caller(url, token["alice"]) as a, _caller(url, token["bob"]) as b:
                    assert _code(await b("SELECT secret FROM public.alice_t")) != "OK"
                    db.admin.execute(f"GRANT {alice} TO {bob}")
                    try:
                        refused = await b("SELECT secret FROM public.alice_t")
                        assert _code(refused) == "SOURCE_UNVERIFIED"
                        assert "alice-only-secret" not in text_of(refused)
                    finally:
                        db.admin.execute(f"REVOKE {alice} FROM {bob}")
                    assert _code(await b("SELECT 1 AS one")) == "OK"
                    assert "alice-only-secret" in text_of(await a("SELECT secret FROM public.alice_t"))
        finally:
            _drop_logins(db, pg_url, alice, bob)


def _drop_logins(db: PgScratch, pg_url: str, *logins: str) -> None:
    db.admin.execute("DROP TABLE IF EXISTS alice_t, bob_t, masked_t CASCADE")
    with pg_admin(pg_url) as c:
        c.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)", [list(logins)]
        )
        for login in logins:
            c.execute(f"DROP ROLE IF EXISTS {login}")


async def test_postgres_masked_column_granted_while_serving_is_refused_until_withheld_again(
    pg_url: str, tmp_path: Path
) -> None:
    with pg_scratch(pg_url, "rvmask") as db:
        r = db.reader
        db.admin.execute("CREATE TABLE masked_t (id int PRIMARY KEY, note text)")
        db.admin.execute("INSERT INTO masked_t VALUES (1, 'private-note')")
        db.admin.execute(f"GRANT SELECT (id) ON masked_t TO {r}")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - masked_t.note\n", encoding="utf-8")
        try:
            async with serving_masked(db.reader_url, masks) as ask:
                assert _code(await ask("SELECT id FROM public.masked_t")) == "OK"
                db.admin.execute(f"GRANT SELECT ON masked_t TO {r}")  # what start-up refuses
                refused = await ask("SELECT id, note FROM public.masked_t")
                assert _code(refused) == "SOURCE_UNVERIFIED" and "private-note" not in text_of(refused)
                db.admin.execute(f"REVOKE SELECT ON masked_t FROM {r}")
                db.admin.execute(f"GRANT SELECT (id) ON masked_t TO {r}")
                assert _code(await ask("SELECT id FROM public.masked_t")) == "OK"
        finally:
            db.admin.execute("DROP TABLE masked_t")


@pytest.mark.mysql
async def test_mariadb_masked_column_granted_to_one_login_while_serving(
    mysql_url: str, tmp_path: Path
) -> None:
    # --mask with a role map of one login per principal: each login's withholding is checked again
    # while serving (before, only its least privilege was), and only that login's principals are refused.
    tag = secrets.token_hex(4)
    db, alice, bob, svc = f"mk_rvmm_{tag}", f"mk_rvmm_{tag}_a", f"mk_rvmm_{tag}_b", f"mk_rvmm_{tag}_s"
    u = make_url(mysql_url)
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.masked_t (id int PRIMARY KEY, note text)")
        c.execute(f"INSERT INTO {db}.masked_t VALUES (1, 'private-note')")
        for user in (alice, bob, svc):
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw' WITH {limit}")
            c.execute(f"GRANT SELECT (id) ON {db}.masked_t TO '{user}'@'%'")
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - masked_t.note\n", encoding="utf-8")
    try:
        dsn = u.set(username=svc, password="pw", database=db).render_as_string(hide_password=False)
        logins: dict[str, tuple[str, str | None]] = {"alice": ("role_a", alice), "bob": ("role_b", bob)}
        with _role_map_server(dsn, tmp_path, logins, "--mask", str(masks)) as (url, token):
            async with _caller(url, token["alice"]) as a, _caller(url, token["bob"]) as b:
                assert _code(await b("SELECT id FROM masked_t")) == "OK"
                with admin.cursor() as c:
                    c.execute(f"GRANT SELECT ON {db}.masked_t TO '{bob}'@'%'")  # what start-up refuses
                try:
                    refused = await b("SELECT id, note FROM masked_t")
                    assert _code(refused) == "SOURCE_UNVERIFIED" and "private-note" not in text_of(refused)
                    assert _code(await a("SELECT id FROM masked_t")) == "OK"
                finally:
                    with admin.cursor() as c:
                        c.execute(f"REVOKE SELECT ON {db}.masked_t FROM '{bob}'@'%'")  # the columns too
                        c.execute(f"GRANT SELECT (id) ON {db}.masked_t TO '{bob}'@'%'")
                assert _code(await b("SELECT id FROM masked_t")) == "OK"
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
            for user in (alice, bob, svc):
                c.execute(f"DROP USER '{user}'@'%'")
        admin.close()


@contextmanager
def _shared_login(db: PgScratch, alice: str, bob: str) -> Iterator[tuple[SqlEngine, IdentityRouter]]:
    """A shared-login router of principals alice and bob over the scratch reader (NOINHERIT, a
    member of both roles, which the caller created)."""
    db.admin.execute(f"ALTER ROLE {db.reader} NOINHERIT")
    db.admin.execute(f"GRANT {alice}, {bob} TO {db.reader}")
    engine = SqlEngine(db.reader_url)
    router = IdentityRouter(
        SqlService(engine, timeout_s=5.0), RoleMap(principals={"alice": alice, "bob": bob}), shared_login=True
    )
    try:
        yield engine, router
    finally:
        router.close()
        engine.close()


def test_postgres_shared_login_start_up_refuses_a_role_member_of_another_principals_role(pg_url: str) -> None:
    with pg_scratch(pg_url, "rvst") as db:
        alice, bob = f"{db.reader}_a", f"{db.reader}_b"
        for role in (alice, bob):
            db.admin.execute(f"CREATE ROLE {role}")
        try:
            with _shared_login(db, alice, bob) as (_, router):
                router.verify()
                db.admin.execute(f"GRANT {alice} TO {bob}")
                with pytest.raises(SqlConfigError, match=f"can switch to {alice}.*REVOKE"):
                    router.verify()
        finally:
            _drop_logins(db, pg_url, alice, bob)


def test_postgres_policy_role_warning_at_start_up_only(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    # A mapped role in a group role a row-level security policy is written for is warned about at
    # start-up (a group may be meant); the same check while serving, run on every catalog change,
    # refuses what start-up refuses but does not repeat the warning.
    with pg_scratch(pg_url, "rvwn") as db:
        alice, bob, group = f"{db.reader}_a", f"{db.reader}_b", f"{db.reader}_g"
        for role in (alice, bob, group):
            db.admin.execute(f"CREATE ROLE {role}")
        db.admin.execute(f"GRANT {group} TO {alice}")
        db.admin.execute("CREATE TABLE alice_t (secret text)")
        db.admin.execute(f"CREATE POLICY p ON alice_t TO {group} USING (true)")
        warning = f"member of {group}, which a row-level security policy"
        try:
            with _shared_login(db, alice, bob) as (engine, router):
                with caplog.at_level("WARNING", logger="mcpkit.sql"):
                    router.verify()
                assert warning in caplog.text
                caplog.clear()
                check = router.isolation(alice)
                assert check is not None
                with caplog.at_level("WARNING", logger="mcpkit.sql"), engine.session(10.0, "t") as (conn, _):
                    check(engine, conn)
                assert warning not in caplog.text
                db.admin.execute(f"GRANT {bob} TO {alice}")
                with (
                    engine.session(10.0, "t") as (conn, _),
                    pytest.raises(SqlConfigError, match=f"switch to {bob}"),
                ):
                    check(engine, conn)
        finally:
            _drop_logins(db, pg_url, alice, bob, group)


def test_postgres_role_map_table_clustered_on_a_masked_index_while_serving(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review (rtd F1 for role-mapped identities): each role's re-verification reads its masked tables'
    # CLUSTER flags again; the per-role wiring had been lost when fixd's check merged into `pins_check`
    with pg_scratch(pg_url, "rvpin") as db:
        alice = f"{db.reader}_a"
        db.admin.execute(f"CREATE ROLE {alice} LOGIN PASSWORD 'pw' CONNECTION LIMIT {READER_CONNECTIONS}")
        router = None
        try:
            db.admin.execute("CREATE TABLE masked_t (id int PRIMARY KEY, name text, email text)")
            db.admin.execute(
                "INSERT INTO masked_t SELECT i, 'n' || i, 'e' || (100 - i) FROM generate_series(1, 50) i"
            )
            db.admin.execute("CREATE INDEX masked_t_email ON masked_t (email)")
            db.admin.execute(f"GRANT SELECT (id, name) ON masked_t TO {db.reader}, {alice}")
            masks, roles = tmp_path / "masks.yaml", tmp_path / "roles.yaml"
            masks.write_text("masks:\n  - masked_t.email\n", encoding="utf-8")
            roles.write_text(
                f"principals:\n  alice: {alice}\nlogins:\n  {alice}: {{user: RV_USER, password: RV_PW}}\n",
                encoding="utf-8",
            )
            monkeypatch.setenv("RV_USER", alice)
            monkeypatch.setenv("RV_PW", "pw")
            parser = argparse.ArgumentParser()
            sqlcli.register(parser.add_subparsers(dest="command"))
            args = parser.parse_args(
                ["sql", "serve", "--dsn", db.reader_url, "--mask", str(masks), "--role-map", str(roles),
                 *UNBOUNDED_MEMORY, "--catalog-check-interval", "0"]
            )  # fmt: skip
            args.allow, args.allow_function = sqlcli.opt_ins(args)
            service = open_service(db.reader_url, args, 100, mapped=frozenset({alice}))
            router = equip(args, service, str(masks), str(roles))
            assert router is not None
            calls = router.service_for("alice")
            assert calls.query("SELECT count(*) AS n FROM public.masked_t", call_id="rv")[0].rows == [[50]]
            db.admin.execute("CLUSTER masked_t USING masked_t_email")  # the heap in e-mail order
            with pytest.raises(ToolError) as info:
                calls.query("SELECT id FROM public.masked_t", call_id="rv")
            assert info.value.code == "SOURCE_UNVERIFIED"
            assert "masked_t" not in str(info.value)
        finally:
            if router is not None:
                router.close()
            _drop_logins(db, pg_url, alice)


@pytest.mark.mysql
async def test_mariadb_role_map_masks_keys_read_per_role(mysql_url: str, tmp_path: Path) -> None:
    # review R13 (the revert of its first fix): each role's re-verification reads the scan-pin
    # findings of the masked tables it can read. A role with no grant on a masked table sees none of
    # its keys in STATISTICS, which read as "no visible PRIMARY KEY": every call of it was refused. A
    # PRIMARY KEY moved onto the masked column while serving refuses the role that reads the table.
    tag = secrets.token_hex(4)
    db, alice, bob, svc = f"mk_rvpk_{tag}", f"mk_rvpk_{tag}_a", f"mk_rvpk_{tag}_b", f"mk_rvpk_{tag}_s"
    u = make_url(mysql_url)
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.masked_t (id int PRIMARY KEY, note varchar(20) NOT NULL)")
        c.execute(f"INSERT INTO {db}.masked_t VALUES (1, 'zz-note'), (2, 'aa-note')")
        c.execute(f"CREATE TABLE {db}.other_t (id int PRIMARY KEY, x int)")
        c.execute(f"INSERT INTO {db}.other_t VALUES (1, 7)")
        for user in (alice, bob, svc):
            limit = f"MAX_USER_CONNECTIONS {READER_CONNECTIONS}"
            c.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw' WITH {limit}")
        for user in (alice, svc):
            c.execute(f"GRANT SELECT (id) ON {db}.masked_t TO '{user}'@'%'")
        c.execute(f"GRANT SELECT ON {db}.other_t TO '{bob}'@'%', '{svc}'@'%'")
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - masked_t.note\n", encoding="utf-8")
    try:
        dsn = u.set(username=svc, password="pw", database=db).render_as_string(hide_password=False)
        logins: dict[str, tuple[str, str | None]] = {"alice": ("role_a", alice), "bob": ("role_b", bob)}
        with _role_map_server(dsn, tmp_path, logins, "--mask", str(masks)) as (url, token):
            async with _caller(url, token["alice"]) as a, _caller(url, token["bob"]) as b:
                assert _code(await b("SELECT x FROM other_t")) == "OK"
                assert _code(await a("SELECT id FROM masked_t")) == "OK"
                with admin.cursor() as c:  # the rows now stored in the masked column's order
                    c.execute(f"ALTER TABLE {db}.masked_t DROP PRIMARY KEY, ADD PRIMARY KEY (note)")
                refused = await a("SELECT id FROM masked_t")
                assert _code(refused) == "SOURCE_UNVERIFIED" and "masked_t" not in text_of(refused)
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE {db}")
            for user in (alice, bob, svc):
                c.execute(f"DROP USER '{user}'@'%'")
        admin.close()
