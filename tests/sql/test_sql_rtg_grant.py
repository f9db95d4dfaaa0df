"""Red team rtg, L1: `mcpkit sql grant` printed a `REVOKE EXECUTE` on a function a granted view and
a granted table's row-level security policy call, without a word: after running the script exactly,
`doctor` said ok and both relations failed with `permission denied for function` for the reader.
The script now says which granted relation it leaves unreadable, through what, and the two ways out.
"""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.sql.sql_support import pg_scratch, run_cli

pytestmark = pytest.mark.postgres

_SETUP = """
CREATE SCHEMA app;
CREATE FUNCTION app.tenant() RETURNS text LANGUAGE sql STABLE
  AS $$ SELECT current_setting('app.tenant', true) $$;
CREATE FUNCTION app.fmt_money(numeric) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT '$' || $1::text $$;
CREATE TABLE app.secrets (tenant text, s text);
INSERT INTO app.secrets VALUES ('a', 'x');
ALTER TABLE app.secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_tenant ON app.secrets FOR SELECT USING (tenant = app.tenant());
CREATE ROLE {other} NOLOGIN;
CREATE POLICY not_the_readers ON app.secrets FOR SELECT TO {other} USING (app.fmt_money(1) = '$1');
CREATE TABLE app.orders (id int, total numeric);
INSERT INTO app.orders VALUES (1, 500);
CREATE VIEW app.big_orders WITH (security_invoker = true)
  AS SELECT id, app.fmt_money(total) AS total FROM app.orders;
CREATE VIEW app.over_big WITH (security_invoker = true) AS SELECT id FROM app.big_orders;
CREATE TABLE app.plain (id int);
"""


def test_grant_says_which_granted_relations_its_revokes_leave_unreadable(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pg_scratch(pg_url, "rtgl1") as db:
        other = f"{db.reader}_o"  # a role a policy is written to: not the reader's
        try:
            db.admin.execute(_SETUP.format(other=other))
            _grant_then_read(db.admin, db.admin_url, f"{db.reader}_g", capsys)
        finally:
            db.admin.execute("DROP POLICY IF EXISTS not_the_readers ON app.secrets")
            db.admin.execute(f"DROP ROLE IF EXISTS {other}")


def _grant_then_read(
    admin: psycopg.Connection, admin_url: str, reader: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = "app.secrets,app.big_orders,app.over_big,app.plain,app.orders"
    code, out = run_cli(capsys, "sql", "grant", "--dsn", admin_url, "--role", reader, "--tables", tables)
    assert code == 0, out
    assert "REVOKE EXECUTE ON FUNCTION app.tenant() FROM PUBLIC" in out, out
    notes = [line for line in out.splitlines() if line.startswith("-- note:")]
    assert len(notes) == 2, out
    joined = "\n".join(notes)
    assert "reads of app.secrets that evaluate app.tenant() (its policy by_tenant calls it) fail" in joined
    assert "reads of app.big_orders that evaluate app.fmt_money(numeric) (its view query calls" in joined
    assert "--allow function:app.fmt_money" in joined and "BEGIN ATOMIC" in joined

    # the notes are true: run the printed script and read as the reader
    admin.execute("\n".join(line for line in out.splitlines() if line and not line.startswith("--")))
    try:
        url = make_url(admin_url).set(drivername="postgresql", username=reader)
        password = out.split("PASSWORD '", 1)[1].split("'", 1)[0]
        dsn = url.set(password=password).render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for relation in ("app.secrets", "app.big_orders"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(f"SELECT * FROM {relation}").fetchall()
            assert conn.execute("SELECT * FROM app.over_big").fetchall() == [(1,)]  # no call reached
            assert conn.execute("SELECT count(*) FROM app.plain").fetchone() == (0,)
    finally:
        admin.execute(f"DROP OWNED BY {reader}")
        admin.execute(f"DROP ROLE {reader}")
