"""The database enforces the promise: every implicit route to a side effect, on an operator's database.

The PostgreSQL fixture is a database the way an operator builds one: tables owned by an
application role that may signal backends, helper functions that call a side-effecting one
(`app.side()`: SECURITY DEFINER, it terminates every session of a canary role and burns a
transaction id), and an operator, a cast, an aggregate, a domain, views, an RLS policy, a default
argument, attribute notation, a plpgsql function labelled STABLE, an SQL-standard body, a range
type whose subtype_diff the planner runs with no EXECUTE check, btree and hash operator classes
whose support functions ORDER BY, GREATEST and GROUP BY run with no EXECUTE check, a DISTINCT view
over an operator family's equality operator, a view
over txid_current() and pg_stat_activity, and the trusted extensions tablefunc and xml2, all
reaching it. The reader was granted SELECT on the schema's tables, as operators do.

1. As found, the start-up check refuses the reader and names every route with its fix.
2. With an `--allow` opt-in, the route it accepts is open again: the test shows what it gives up.
3. After the operator runs the printed fixes, the check passes, and every route, with admission
   on and with admission switched off, is refused or stopped by PostgreSQL (permission denied),
   the canary session of the other role is alive, and nothing changed.

MariaDB: a routine created by root runs as its definer; the same three steps.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pymysql
import pytest
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.admission import Admitted, FunctionPolicy
from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import (
    READER_CONNECTIONS,
    changed,
    mcpkit_here,
    mysql_admin,
    pg_admin,
    pg_need_extensions,
)

# Fingerprints the whole server (roles, databases, settings): runs after the parallel part.
pytestmark = pytest.mark.serial

TIMEOUT_S = 3.0

_PG_OBJECTS = """
CREATE TABLE app.t (id int PRIMARY KEY, v text);
INSERT INTO app.t VALUES (1, 'a'), (2, 'b');
CREATE FUNCTION app.side() RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
BEGIN PERFORM txid_current(); PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE usename = '{canary}'; RETURN true; END $$;
CREATE FUNCTION app.plus(a text, b text) RETURNS text LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM app.side(); RETURN a || b; END $$;
CREATE OPERATOR app.+ (LEFTARG = text, RIGHTARG = text, FUNCTION = app.plus);
CREATE FUNCTION app.tf(acc int, x int) RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM app.side(); RETURN coalesce(acc, 0) + x; END $$;
CREATE AGGREGATE app.agg(int) (SFUNC = app.tf, STYPE = int);
CREATE TYPE app.mytype AS (x int);
CREATE FUNCTION app.tomy(int) RETURNS app.mytype LANGUAGE plpgsql VOLATILE
  AS $$ BEGIN PERFORM app.side(); RETURN ROW($1); END $$;
CREATE CAST (int AS app.mytype) WITH FUNCTION app.tomy(int);
CREATE FUNCTION app.dcheck(text) RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT app.side()';
CREATE DOMAIN app.dom AS text CHECK (app.dcheck(VALUE));
CREATE FUNCTION app.vf() RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT app.side()';
CREATE VIEW app.v AS SELECT id, app.vf() AS s FROM app.t;
CREATE FUNCTION app.pf() RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT app.side()';
CREATE TABLE app.p (id int);
INSERT INTO app.p VALUES (1);
ALTER TABLE app.p ENABLE ROW LEVEL SECURITY;
CREATE POLICY pp ON app.p FOR SELECT USING (app.pf());
CREATE FUNCTION app.df() RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT app.side()';
CREATE FUNCTION app.withdef(a int, b boolean DEFAULT app.df()) RETURNS int LANGUAGE plpgsql STABLE
  AS 'BEGIN RETURN a; END';
CREATE FUNCTION app.attr(r app.t) RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT app.side()';
CREATE FUNCTION app.liar() RETURNS boolean LANGUAGE plpgsql STABLE
  AS $$ BEGIN RETURN app.side(); END $$;
CREATE FUNCTION app.atomic_xid() RETURNS bigint LANGUAGE sql STABLE BEGIN ATOMIC SELECT txid_current(); END;
CREATE VIEW app.vx AS SELECT txid_current() AS x;
CREATE FUNCTION app.fdiff(a float8, b float8) RETURNS float8 LANGUAGE plpgsql IMMUTABLE
  AS $$ BEGIN PERFORM app.side(); RETURN a - b; END $$;
CREATE TYPE app.frange AS RANGE (SUBTYPE = float8, SUBTYPE_DIFF = app.fdiff);
CREATE TABLE app.rt (r app.frange);
INSERT INTO app.rt SELECT app.frange(g, g + 1) FROM generate_series(1, 500) g;
ANALYZE app.rt;
CREATE VIEW app.act AS SELECT pid, query FROM pg_stat_activity;
CREATE FUNCTION app.boxcmp(a box, b box) RETURNS int LANGUAGE plpgsql IMMUTABLE
  AS $$ BEGIN PERFORM app.side(); RETURN 0; END $$;
REVOKE EXECUTE ON FUNCTION app.boxcmp(box, box) FROM PUBLIC;
CREATE FUNCTION app.jhash(j json) RETURNS int LANGUAGE plpgsql IMMUTABLE
  AS $$ BEGIN PERFORM app.side(); RETURN 0; END $$;
REVOKE EXECUTE ON FUNCTION app.jhash(json) FROM PUBLIC;
CREATE FUNCTION hid.jeq(a json, b json) RETURNS boolean LANGUAGE sql VOLATILE
  BEGIN ATOMIC SELECT a::text = b::text AND app.side(); END;
CREATE OPERATOR hid.= (LEFTARG = json, RIGHTARG = json, FUNCTION = hid.jeq);
"""
# Operator classes need a superuser; their support functions run with no EXECUTE check.
_PG_SUPERUSER_OBJECTS = """
CREATE OPERATOR CLASS app.box_ops DEFAULT FOR TYPE box USING btree AS
  OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 app.boxcmp(box, box);
CREATE OPERATOR CLASS app.json_hops DEFAULT FOR TYPE json USING hash AS
  OPERATOR 1 hid.=, FUNCTION 1 app.jhash(json);
"""
# A view whose only route is DISTINCT's equality operator (SortGroupClause eqop in its tree).
_PG_AFTER_OPCLASS = "CREATE VIEW app.vd AS SELECT DISTINCT json_build_object('a', id) AS j FROM app.t"

# route -> the query an agent sends
PG_ROUTES = {
    "secdef_call": "SELECT app.side()",
    "operator": "SELECT 'a' OPERATOR(app.+) 'b' AS x",
    "aggregate": "SELECT app.agg(id) AS s FROM app.t",
    "window_aggregate": "SELECT app.agg(id) OVER () AS s FROM app.t",
    "cast": "SELECT (1::app.mytype)::text AS x",
    "domain": "SELECT ('x'::app.dom)::text AS x",
    "view": "SELECT id FROM app.v",
    "policy": "SELECT id FROM app.p",
    "default_argument": "SELECT app.withdef(1) AS x",
    "attribute_notation": "SELECT t.attr AS x FROM app.t AS t",
    "stable_label_lies": "SELECT app.liar() AS x",
    "atomic_body_xid": "SELECT app.atomic_xid() AS x",
    "view_burns_xid": "SELECT x FROM app.vx",
    "view_shows_sessions": "SELECT query FROM app.act",
    "range_subtype_diff_in_planner": "SELECT count(*) AS n FROM app.rt WHERE r && app.frange(10, 20)",
    "crosstab_string_sql": "SELECT * FROM crosstab('SELECT app.side()::text, ''a''::text, ''b''::text')"
    " AS c(r text, a text)",
    "connectby_string_sql": "SELECT * FROM connectby('(SELECT app.side()::text AS k, NULL::text AS p) s',"
    " 'k', 'p', 'true', 0) AS c(k text, p text, l int)",
    "xpath_table_string_sql": "SELECT * FROM xpath_table('k', 'v',"
    " '(SELECT 1 AS k, app.side()::text AS v) s', '/a', 'true') AS x(k int, a text)",
    "btree_support_order_by": "SELECT count(*) AS n FROM (SELECT id FROM app.t"
    " ORDER BY box(point(id, id), point(0, 0))) s",
    "btree_support_greatest": "SELECT greatest(box(point(1, 1), point(0, 0)),"
    " box(point(2, 2), point(0, 0)))::text AS g",
    "hash_support_group_by": "SELECT count(*) AS n FROM (SELECT json_build_object('a', id) AS j FROM app.t) s"
    " GROUP BY j",
    "view_distinct_eqop": "SELECT count(*) AS n FROM app.vd",
    "array_eq_type_cache": "SELECT (ARRAY[json_build_object('a', 1)]"
    " = ARRAY[json_build_object('a', 1)])::text AS e",
}
# Routes whose printed fix removes the operator class: the query then has no operator to use.
PG_GONE = {"btree_support_order_by", "btree_support_greatest", "hash_support_group_by", "array_eq_type_cache"}
# What the start-up check must name for each route (substrings of one finding).
PG_NAMED = [
    "function app.side() runs as its owner",
    "function app.plus(text,text) is VOLATILE",
    "function app.agg runs app.tf with no EXECUTE check",
    "relation app.rt runs app.fdiff with no EXECUTE check",
    "function app.tomy(integer) is VOLATILE",
    "function app.dcheck(text) is VOLATILE",
    "function app.vf() is VOLATILE",
    "function app.pf() is VOLATILE",
    "function app.df() is VOLATILE",
    "function app.attr(app.t) is VOLATILE",
    "function app.liar() is written in plpgsql",
    "function app.atomic_xid runs pg_catalog.txid_current, which assigns a transaction id",
    "relation app.vx runs pg_catalog.txid_current, which assigns a transaction id",
    "relation app.act reads pg_catalog.pg_stat_activity, which shows other sessions' SQL text",
    "functions of extension tablefunc: each runs SQL from a string",
    "functions of extension xml2: each runs SQL from a string",
    "operator family app.box_ops (btree) runs app.boxcmp with no EXECUTE check",
    "operator family app.json_hops (hash) runs",
    "relation app.vd runs hid.jeq, which is VOLATILE",
]


@dataclass
class OperatorDb:
    admin: str
    reader: str
    schema_state: str
    canary_role: str
    canary: psycopg.Connection[Any] | None = None

    def canary_alive(self) -> bool:
        try:
            return self.canary is not None and self.canary.execute("SELECT 1").fetchone() == (1,)
        except psycopg.Error:
            return False

    def respawn_canary(self) -> None:
        if not self.canary_alive():
            url = make_url(self.admin).set(drivername="postgresql", username=self.canary_role)
            self.canary = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)


@pytest.fixture(scope="module")
def operator_pg(pg_url: str) -> Iterator[OperatorDb]:
    tag = secrets.token_hex(4)
    db, owner, reader, canary = (
        f"mcpkit_x_{tag}",
        f"mcpkit_own_{tag}",
        f"mcpkit_rd_{tag}",
        f"mcpkit_cn_{tag}",
    )
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE ROLE {owner} NOLOGIN IN ROLE pg_signal_backend")
        c.execute(f"CREATE ROLE {reader} LOGIN")
        c.execute(f"CREATE ROLE {canary} LOGIN")
    admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
    with pg_admin(admin) as c:
        pg_need_extensions(c, "tablefunc", "xml2")
        c.execute("CREATE EXTENSION tablefunc")
        c.execute("CREATE EXTENSION xml2")
        c.execute(f"CREATE SCHEMA app AUTHORIZATION {owner}")
        c.execute(f"CREATE SCHEMA hid AUTHORIZATION {owner}")  # the reader may not use it
        c.execute(f"SET ROLE {owner}")
        c.execute(_PG_OBJECTS.replace("{canary}", canary))
        c.execute("RESET ROLE")
        c.execute(_PG_SUPERUSER_OBJECTS)
        c.execute(f"SET ROLE {owner}")
        c.execute(_PG_AFTER_OPCLASS)
        c.execute(f"GRANT USAGE ON SCHEMA app TO {reader}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA app TO {reader}")
        c.execute("RESET ROLE")
        c.execute(f"ALTER ROLE {reader} IN DATABASE {db} SET search_path = app, public")
    url = make_url(admin).set(username=reader).render_as_string(hide_password=False)
    env = OperatorDb(admin, url, "", canary)
    env.respawn_canary()
    yield env
    if env.canary is not None:
        env.canary.close()
    with pg_admin(pg_url) as c:
        c.execute(f"DROP DATABASE {db} WITH (FORCE)")
        for role in (reader, canary, owner):
            c.execute(f"DROP ROLE {role}")


def _snapshot(env: OperatorDb) -> dict[str, Any]:
    with pg_admin(env.admin) as c:
        return {
            "tables": c.execute("SELECT (SELECT array_agg(t ORDER BY id) FROM app.t t)::text").fetchall(),
            "policies": c.execute("SELECT (SELECT array_agg(p) FROM app.p p)::text").fetchall(),
            # this fixture's roles and all-role settings: other sessions share the cluster
            "role_settings": c.execute(
                "SELECT setconfig::text FROM pg_db_role_setting WHERE setrole = 0"
                " OR setrole::regrole::text LIKE %s ORDER BY 1",
                ["%" + env.canary_role.rsplit("_", 1)[1]],
            ).fetchall(),
            "memberships": c.execute("SELECT roleid, member FROM pg_auth_members ORDER BY 1, 2").fetchall(),
            "functions": c.execute(
                "SELECT oid, proacl::text FROM pg_proc WHERE oid >= 16384 ORDER BY 1"
            ).fetchall(),
        }


def _passthrough(sql: str, dialect: str, **_: Any) -> Admitted:
    return Admitted(sql=sql, tree=exp.Select())


def _outcome(service: SqlService, sql: str) -> str:
    try:
        service.query(sql, call_id="route", max_rows=5)
    except Refused as exc:
        return f"refused {(exc.data or {}).get('reason')}"
    except QueryFailed as exc:
        return f"failed {exc.kind}"
    except QueryTimeout:
        return "timeout"
    return "answered"


@pytest.mark.postgres
def test_1_as_found_the_start_up_check_names_every_route(operator_pg: OperatorDb) -> None:
    engine = SqlEngine(operator_pg.reader)
    try:
        report = inspect_account(engine)
    finally:
        engine.close()
    lines = [f.line() for f in report.findings]
    for expected in PG_NAMED:
        assert any(expected in line for line in lines), f"not named: {expected}\n" + "\n".join(lines)
    with pytest.raises(SqlConfigError) as refused:
        ensure_safe_account(report)
    assert "REVOKE EXECUTE ON FUNCTION app.side() FROM PUBLIC" in str(refused.value)
    # Through the shipped CLI: exit 2, one line per finding with the SQL that removes it.
    done = mcpkit_here("sql", "query", "--dsn", operator_pg.reader, "SELECT 1")
    assert (
        done.returncode == 2 and "REVOKE EXECUTE ON FUNCTION app.plus(text,text) FROM PUBLIC" in done.stderr
    )
    doctor = mcpkit_here("sql", "doctor", "--dsn", operator_pg.reader)
    assert (
        doctor.returncode != 0
        and "DROP OPERATOR FAMILY app.box_ops USING btree" in doctor.stdout + doctor.stderr
    )


# What each opt-in gives up: the route it accepts runs its side effect again.
OPT_INS = [
    ("function:app.plus", "operator"),
    ("extension:tablefunc", "crosstab_string_sql"),
    ("function:app.liar", "stable_label_lies"),
    ("relation:app.rt", "range_subtype_diff_in_planner"),
    ("function:app.boxcmp", "btree_support_order_by"),
    ("function:hid.jeq", "array_eq_type_cache"),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("opt_in", "route"), OPT_INS)
def test_2_an_opt_in_reopens_its_route(operator_pg: OperatorDb, opt_in: str, route: str) -> None:
    engine = SqlEngine(operator_pg.reader)
    try:
        report = inspect_account(engine, allowed=[opt_in])
        named = opt_in.split(":", 1)[1]
        assert not any(named in f.line().split(":")[0] and f.opt_in == opt_in for f in report.findings)
        operator_pg.respawn_canary()
        assert operator_pg.canary_alive()
        # With admission off: what the database no longer stops (the parser may still refuse it).
        raw = SqlService(engine, timeout_s=TIMEOUT_S)
        raw._admit = _passthrough
        outcome = _outcome(raw, PG_ROUTES[route])
        assert not operator_pg.canary_alive(), f"{route} with {opt_in}: {outcome}, the canary survived"
    finally:
        engine.close()
        operator_pg.respawn_canary()


@pytest.mark.postgres
def test_3_after_the_printed_fixes_every_route_is_stopped_by_the_database(operator_pg: OperatorDb) -> None:
    engine = SqlEngine(operator_pg.reader)
    try:
        fixes = [f.fix for f in inspect_account(engine).findings]
        with pg_admin(operator_pg.admin) as c:
            for fix in fixes:
                c.execute(fix)  # exactly as printed
        assert inspect_account(engine).findings == []
        ensure_safe_account(inspect_account(engine))
        operator_pg.respawn_canary()
        before = _snapshot(operator_pg)
        checked = SqlService(engine, timeout_s=TIMEOUT_S)
        raw = SqlService(engine, timeout_s=TIMEOUT_S)
        raw._admit = _passthrough
        for route, sql in PG_ROUTES.items():
            with_admission = _outcome(checked, sql)
            database_alone = _outcome(raw, sql)
            assert with_admission != "answered", f"{route}: answered"
            stopped = "failed undefined_object" if route in PG_GONE else "failed permission"
            assert database_alone == stopped, f"{route}: the database did not stop it ({database_alone})"
            assert operator_pg.canary_alive(), f"{route}: the canary session was terminated"
        assert changed(before, _snapshot(operator_pg)) == []
        # The reader still reads what it was granted.
        assert checked.query("SELECT count(*) AS n FROM app.t", call_id="ok")[0].rows == [[2]]
    finally:
        engine.close()


@pytest.mark.postgres
def test_grant_prints_a_reader_role_that_starts_clean(operator_pg: OperatorDb) -> None:
    role = f"mcpkit_gr_{secrets.token_hex(4)}"
    done = mcpkit_here("sql", "grant", "--dsn", operator_pg.admin, "--role", role, "--tables", "app.t,app.p")
    assert done.returncode == 0, done.stderr
    statements = _statements(done.stdout)
    assert " CONNECTION LIMIT 7 PASSWORD " in statements[0], statements[0]  # the default pool's + 2
    url = make_url(operator_pg.admin).set(username=role).render_as_string(hide_password=False)
    try:
        with pg_admin(operator_pg.admin) as c:
            for statement in statements:
                c.execute(statement.rstrip(";"))
        started = mcpkit_here("sql", "query", "--dsn", url, "SELECT count(*) AS n FROM t")
        assert started.returncode == 0, started.stderr
        doctor = mcpkit_here("sql", "doctor", "--dsn", url)
        assert doctor.returncode == 0, doctor.stdout
        # connection limit and temp_file_limit set; the suite's shared server runs without a data
        # limit under --allow unbounded-memory (tests/conftest.py), which doctor warns about
        warns = [line for line in doctor.stdout.splitlines() if line.startswith("warn")]
        assert [w for w in warns if "backend memory" not in w] == [], doctor.stdout
    finally:
        with pg_admin(operator_pg.admin) as c:
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")


def _statements(script: str) -> list[str]:
    body = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    return [s.strip() for s in body.split(";\n") if s.strip().rstrip(";")]


# --- MariaDB ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def operator_mysql(mysql_url: str) -> Iterator[tuple[str, str, str]]:
    tag = secrets.token_hex(4)
    db, reader = f"mcpkit_x_{tag}", f"mcpkit_rd_{tag}"
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE TABLE {db}.totals_a (n int)")
        c.execute(f"CREATE TABLE {db}.totals_b (n int)")
        c.execute(f"INSERT INTO {db}.totals_a VALUES (1)")
        c.execute(f"INSERT INTO {db}.totals_b VALUES (424242)")
        c.execute(f"CREATE USER '{reader}'@'%' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}")
        c.execute(f"GRANT SELECT ON {db}.totals_a TO '{reader}'@'%'")
        c.execute(f"GRANT EXECUTE ON {db}.* TO '{reader}'@'%'")  # "so the app's helpers work"
        # Created by root: SQL SECURITY DEFINER is the default.
        c.execute(
            f"CREATE FUNCTION {db}.f_file() RETURNS TEXT READS SQL DATA RETURN LOAD_FILE('/etc/passwd')"
        )
        c.execute(
            f"CREATE FUNCTION {db}.f_other() RETURNS INT READS SQL DATA RETURN (SELECT n FROM {db}.totals_b)"
        )
    base = make_url(mysql_url).set(database=db)
    yield (
        base.render_as_string(hide_password=False),
        base.set(username=reader).render_as_string(hide_password=False),
        db,
    )
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE {db}")
        c.execute(f"DROP USER '{reader}'@'%'")
    admin.close()


@pytest.mark.mysql
def test_mariadb_definer_routines_refused_then_stopped(operator_mysql: tuple[str, str, str]) -> None:
    admin_url, reader_url, db = operator_mysql
    engine = SqlEngine(reader_url)
    try:
        report = inspect_account(engine)
        lines = [f.line() for f in report.findings]
        assert any(f"function {db}.f_file, which runs as its definer" in line for line in lines), lines
        assert any(f"function {db}.f_other, which runs as its definer" in line for line in lines), lines
        # Admission lets both through (--allow-function), so the database is what is tested below.
        functions = FunctionPolicy.for_dialect("mysql", extra=[f"{db}.f_file", f"{db}.f_other"])
        service = SqlService(engine, timeout_s=TIMEOUT_S, functions=functions)
        # What --allow routine:... gives up: the definer's FILE privilege and the other tenant's rows.
        allowed = inspect_account(engine, allowed=[f"routine:{db}.f_file", f"routine:{db}.f_other"])
        assert allowed.findings == []
        assert "root:" in str(service.query(f"SELECT {db}.f_file() AS f", call_id="x")[0].rows)
        assert service.query(f"SELECT {db}.f_other() AS n", call_id="x")[0].rows == [[424242]]
        # The printed fix, run as printed.
        admin = mysql_admin(admin_url)
        with admin.cursor() as c:
            for fix in dict.fromkeys(f.fix.split("; or ")[0] for f in report.findings):
                c.execute(fix)  # two routines share one schema-wide REVOKE
        admin.close()
        assert inspect_account(engine).findings == []
        for sql in (f"SELECT {db}.f_file() AS f", f"SELECT {db}.f_other() AS n", "SELECT n FROM totals_b"):
            assert _outcome(service, sql) in ("failed permission", "refused function"), sql
        assert service.query("SELECT n FROM totals_a", call_id="ok")[0].rows == [[1]]
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_grant_prints_a_login_that_starts_clean(operator_mysql: tuple[str, str, str]) -> None:
    admin_url, _, db = operator_mysql
    user = f"mcpkit_gr_{secrets.token_hex(4)}"
    done = mcpkit_here("sql", "grant", "--dsn", admin_url, "--role", user, "--tables", f"{db}.totals_a")
    assert done.returncode == 0, done.stderr
    statements = _statements(done.stdout)
    password = statements[0].split("IDENTIFIED BY '")[1].split("'")[0]
    # the connection limit serve checks, for the default --pool-size 5 (5 + the watchdog's + 1)
    assert statements[0].endswith("WITH MAX_USER_CONNECTIONS 7"), statements[0]
    admin = mysql_admin(admin_url)
    try:
        with admin.cursor() as c:
            for statement in statements:
                c.execute(statement.rstrip(";"))
        url = make_url(admin_url).set(username=user, password=password).render_as_string(hide_password=False)
        started = mcpkit_here("sql", "query", "--dsn", url, "SELECT n FROM totals_a")
        assert started.returncode == 0, started.stderr
        assert _mysql_cannot_run_definers(url, db)
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP USER '{user}'@'%'")
        admin.close()


def _mysql_cannot_run_definers(url: str, db: str) -> bool:
    u = make_url(url)
    conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username, password=u.password or "")
    try:
        with conn.cursor() as c:
            c.execute(f"SELECT {db}.f_file()")
    except pymysql.err.OperationalError as exc:
        return exc.args[0] == 1370  # execute command denied
    finally:
        conn.close()
    return False
