"""Types reach functions too (red team, issue 10, break 2): a cast to a domain whose USAGE was
revoked, to a composite type with a domain attribute, to a range over such a domain, and a granted
view with such a cast all run the domain's CHECK, and that function's EXECUTE is what PostgreSQL
checks. The helper lives in a schema the reader has no USAGE on, executable by PUBLIC by default.

1. As found, the start-up check refuses the reader, naming each route and, for a type, the
   REVOKE EXECUTE that stops it (not REVOKE USAGE ON DOMAIN, which does not).
2. After the printed fixes, the check is clean, PostgreSQL refuses every route (permission
   denied), and the canary (a session of the same reader account) is alive.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_admin

_OBJECTS = """
CREATE TABLE app.orders (id int PRIMARY KEY, customer text);
INSERT INTO app.orders VALUES (1, 'a'), (2, 'b');
CREATE FUNCTION priv.bump(x int) RETURNS boolean LANGUAGE sql VOLATILE AS $$
  SELECT count(pg_terminate_backend(pid)) >= 0 FROM pg_stat_activity
  WHERE application_name = 'mcpkit_canary' AND pid <> pg_backend_pid() $$;
CREATE DOMAIN priv.dchk AS int CHECK (priv.bump(VALUE));
CREATE DOMAIN app.dpos AS int CHECK (priv.bump(VALUE));
REVOKE USAGE ON DOMAIN app.dpos FROM PUBLIC;
CREATE TYPE app.rec AS (a int, b priv.dchk);
CREATE TYPE app.drange AS RANGE (subtype = priv.dchk);
CREATE VIEW app.v_orders AS SELECT id, CAST('(' || id || ',1)' AS app.rec) AS r FROM app.orders;
"""
ROUTES = {
    "domain_usage_revoked": ("type app.dpos", "SELECT CAST(1 AS app.dpos) AS x"),
    "composite_attribute": ("type app.rec", "SELECT CAST('(1,1)' AS app.rec) AS x"),
    "range_subtype": ("type app.drange", "SELECT CAST('[1,5)' AS app.drange) AS x"),
    "view_cast": ("relation app.v_orders", "SELECT id, r FROM app.v_orders"),
}
FIX = "REVOKE EXECUTE ON FUNCTION priv.bump(integer) FROM PUBLIC"


@dataclass
class Db:
    admin: str
    reader: str
    canary: psycopg.Connection[Any] | None = None

    def respawn(self) -> None:
        url = make_url(self.reader).set(drivername="postgresql").render_as_string(hide_password=False)
        self.canary = psycopg.connect(url, autocommit=True, application_name="mcpkit_canary")

    def alive(self) -> bool:
        try:
            return self.canary is not None and self.canary.execute("SELECT 1").fetchone() == (1,)
        except psycopg.Error:
            return False


@pytest.fixture(scope="module")
def typed_db(pg_url: str) -> Iterator[Db]:
    tag = secrets.token_hex(4)
    db, owner, reader = f"mcpkit_x_{tag}", f"mcpkit_own_{tag}", f"mcpkit_rd_{tag}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE ROLE {owner} NOLOGIN")
        c.execute(f"CREATE ROLE {reader} LOGIN")
    admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
    with pg_admin(admin) as c:
        c.execute(f"CREATE SCHEMA app AUTHORIZATION {owner}")
        c.execute(f"CREATE SCHEMA priv AUTHORIZATION {owner}")
        c.execute(f"SET ROLE {owner}")
        c.execute(_OBJECTS)
        c.execute(f"GRANT USAGE ON SCHEMA app TO {reader}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA app TO {reader}")
        c.execute("RESET ROLE")
    env = Db(admin, make_url(admin).set(username=reader).render_as_string(hide_password=False))
    yield env
    if env.canary is not None:
        env.canary.close()
    with pg_admin(pg_url) as c:
        c.execute(f"DROP DATABASE {db} WITH (FORCE)")
        c.execute(f"DROP ROLE {reader}")
        c.execute(f"DROP ROLE {owner}")


def _findings(env: Db) -> list[str]:
    engine = SqlEngine(env.reader)
    try:
        report = inspect_account(engine)
    finally:
        engine.close()
    return [f.line() for f in report.findings]


@pytest.mark.postgres
def test_1_as_found_each_type_route_is_named_with_the_fix_that_stops_it(typed_db: Db) -> None:
    lines = _findings(typed_db)
    text = "\n".join(lines)
    for route, (entry, _) in ROUTES.items():
        mine = [line for line in lines if line.startswith(f"{entry} runs priv.bump") or f" {entry} " in line]
        assert mine, f"{route}: {entry} not named\n{text}"
        if entry.startswith("type"):
            assert all(FIX in line for line in mine), f"{route}: wrong fix\n{text}"
    assert "REVOKE USAGE ON DOMAIN" not in text
    # Without the fixes the route is real: the canary session dies.
    typed_db.respawn()
    engine = SqlEngine(typed_db.reader)
    try:
        SqlService(engine, timeout_s=3.0).query(ROUTES["composite_attribute"][1], call_id="t", max_rows=5)
    finally:
        engine.close()
    assert not typed_db.alive(), "the route did not run: the test proves nothing"


@pytest.mark.postgres
def test_2_after_the_printed_fixes_the_database_stops_every_route(typed_db: Db) -> None:
    lines = [line for line in _findings(typed_db) if "priv.bump" in line]
    assert any(line.endswith(f": {FIX} (or --allow type:app.rec)") for line in lines), lines
    with pg_admin(typed_db.admin) as c:
        c.execute(FIX)  # the one fix every type route printed; the view's REVOKE SELECT is not needed
    assert not [line for line in _findings(typed_db) if "priv.bump" in line]
    engine = SqlEngine(typed_db.reader)
    try:
        report = inspect_account(engine)
        ensure_safe_account(report)
        service = SqlService(engine, timeout_s=3.0)
        for route, (_, sql) in ROUTES.items():
            typed_db.respawn()
            with pytest.raises(QueryFailed):
                service.query(sql, call_id=route, max_rows=5)
            assert typed_db.alive(), f"{route}: the canary was terminated"
    finally:
        engine.close()
