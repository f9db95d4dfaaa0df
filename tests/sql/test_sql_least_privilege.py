"""Each least-privilege finding on the real engine: held directly, held through a role, then gone
after the printed fix; and a fix that removes two findings is printed once.

PostgreSQL: CREATEROLE, BYPASSRLS, REPLICATION on the login, and the same attributes on a role the
login can SET ROLE to (directly or through another role). MariaDB: FILE, SUPER, PROCESS on the
login, through a default role, and through a role of a role that is not enabled.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.admission.function_tables.postgres import POSTGRES
from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles import AccountReport
from mcpkit.sql.profiles.base import ConnectionBudget
from mcpkit.sql.profiles.postgres.knowledge import unreachable_reason
from tests.sql.sql_support import mcpkit_in_process, mysql_admin, pg_admin, pg_need_extensions


def _report(url: str) -> AccountReport:
    engine = SqlEngine(url)
    try:
        return inspect_account(engine)
    finally:
        engine.close()


def _by_code(report: AccountReport, *codes: str) -> dict[str, str]:
    return {f.code: f.line() for f in report.findings if f.code in codes}


# --- PostgreSQL -----------------------------------------------------------------------------------


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[tuple[str, str]]:
    """A database of its own (the route audit sees only this database's objects) and a tag."""
    tag = secrets.token_hex(4)
    db = f"mk_lp_{tag}"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
    roles: list[str] = []
    yield make_url(pg_url).set(database=db).render_as_string(hide_password=False), tag
    with pg_admin(pg_url) as c:
        c.execute(f"DROP DATABASE {db} WITH (FORCE)")
        for (role,) in c.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", [f"mk_lp_{tag}_%"]):
            roles.append(role)
        for role in sorted(roles, reverse=True):
            c.execute(f"DROP ROLE {role}")


def _login(admin: str, role: str) -> str:
    return make_url(admin).set(username=role, password=None).render_as_string(hide_password=False)


@pytest.mark.postgres
def test_postgres_role_attributes_refused_then_clean(pg_db: tuple[str, str]) -> None:
    admin, tag = pg_db
    role = f"mk_lp_{tag}_a"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {role} LOGIN CREATEROLE BYPASSRLS REPLICATION")
    found = _by_code(_report(_login(admin, role)), "createrole", "bypassrls", "replication")
    assert set(found) == {"createrole", "bypassrls", "replication"}
    assert f"ALTER ROLE {role} NOCREATEROLE" in found["createrole"]
    assert f"ALTER ROLE {role} NOBYPASSRLS" in found["bypassrls"]
    assert f"ALTER ROLE {role} NOREPLICATION" in found["replication"]
    with pg_admin(admin) as c:
        for line in found.values():
            c.execute(re.search(r"ALTER ROLE \S+ NO\w+", line)[0])  # type: ignore[index]
    assert _by_code(_report(_login(admin, role)), "createrole", "bypassrls", "replication") == {}


@pytest.mark.postgres
@pytest.mark.parametrize("chain", [False, True], ids=["direct", "through-another-role"])
def test_postgres_membership_in_a_privileged_role_refused_then_clean(
    pg_db: tuple[str, str], chain: bool
) -> None:
    admin, tag = pg_db
    login, holder, middle = f"mk_lp_{tag}_b", f"mk_lp_{tag}_g", f"mk_lp_{tag}_m"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {holder} NOLOGIN CREATEROLE BYPASSRLS REPLICATION")
        c.execute(f"CREATE ROLE {login} LOGIN")
        if chain:
            c.execute(f"CREATE ROLE {middle} NOLOGIN")
            c.execute(f"GRANT {holder} TO {middle}")
            c.execute(f"GRANT {middle} TO {login}")
        else:
            c.execute(f"GRANT {holder} TO {login}")
    report = _report(_login(admin, login))
    found = [f for f in report.findings if f.code == "powerful-membership"]
    assert len(found) == 1
    line = found[0].line()
    assert f"is a member of {holder}, which has CREATEROLE, BYPASSRLS, REPLICATION" in line
    granted = middle if chain else holder
    assert line.endswith(f"REVOKE {granted} FROM {login}")
    assert ("through" in line) is chain
    with pytest.raises(SqlConfigError, match="SET ROLE takes it on"):
        ensure_safe_account(report)
    with pg_admin(admin) as c:
        c.execute(f"REVOKE {granted} FROM {login}")
    assert not [f for f in _report(_login(admin, login)).findings if f.code == "powerful-membership"]


@pytest.mark.postgres
@pytest.mark.parametrize("through", [False, True], ids=["direct", "through-a-role"])
def test_postgres_parameter_privileges_refused_then_clean(pg_db: tuple[str, str], through: bool) -> None:
    # GRANT SET / ALTER SYSTEM ON PARAMETER (15+): superuser-only settings a reader must not change
    admin, tag = pg_db
    login, holder = f"mk_lp_{tag}_p", f"mk_lp_{tag}_h"
    grantee = holder if through else login
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(f"CREATE ROLE {holder} NOLOGIN")
        c.execute(f"GRANT {holder} TO {login}")
        c.execute(f"GRANT SET ON PARAMETER session_replication_role TO {grantee}")
        c.execute(f"GRANT ALTER SYSTEM ON PARAMETER log_statement TO {grantee}")
    try:
        report = _report(_login(admin, login))
        found = {f.opt_in: f for f in report.findings if f.code == "parameter-grant"}
        assert set(found) == {"parameter:session_replication_role", "parameter:log_statement"}
        srr = found["parameter:session_replication_role"]
        assert srr.fix == f"REVOKE SET ON PARAMETER session_replication_role FROM {grantee}"
        assert "ALTER SYSTEM on parameter log_statement" in found["parameter:log_statement"].message
        with pytest.raises(SqlConfigError, match="session_replication_role"):
            ensure_safe_account(report)
        assert len(ensure_safe_account(report, allow=[str(k) for k in found])) == 2  # opted into
        with pg_admin(admin) as c:
            for f in found.values():
                c.execute(f.fix)
        assert not [f for f in _report(_login(admin, login)).findings if f.code == "parameter-grant"]
    finally:
        with pg_admin(admin) as c:  # parameter privileges are cluster-wide: never leave one behind
            c.execute(f"REVOKE ALL ON PARAMETER session_replication_role, log_statement FROM {grantee}")


@pytest.mark.postgres
@pytest.mark.parametrize("through_view", [False, True], ids=["operator", "view-using-it"])
def test_postgres_operator_with_an_estimator_is_refused_though_not_executable(
    pg_db: tuple[str, str], through_view: bool
) -> None:
    # The planner runs the function of an operator with RESTRICT = eqsel on the column's most
    # common values before the executor checks EXECUTE (red team pg10 F10): REVOKE closes nothing.
    admin, tag = pg_db
    login = f"mk_lp_{tag}_e"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA ops; CREATE SCHEMA app;"
            "CREATE FUNCTION ops.eqf(a text, b text) RETURNS bool LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'the planner ran it'; END $$;"
            "REVOKE EXECUTE ON FUNCTION ops.eqf(text, text) FROM PUBLIC;"
            "CREATE OPERATOR ops.=# (LEFTARG = text, RIGHTARG = text, FUNCTION = ops.eqf, RESTRICT = eqsel);"
            "CREATE TABLE app.t AS SELECT 'carol'::text AS owner FROM generate_series(1, 50); ANALYZE app.t;"
            "CREATE VIEW app.v WITH (security_invoker) AS"
            " SELECT * FROM app.t WHERE owner OPERATOR(ops.=#) 'x';"
        )
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}")
        c.execute(f"GRANT SELECT ON app.t, app.v TO {login}")
        if not through_view:
            c.execute(f"GRANT USAGE ON SCHEMA ops TO {login}")
    query = (
        "SELECT count(*) FROM app.v"
        if through_view
        else "SELECT count(*) FROM app.t WHERE owner OPERATOR(ops.=#) 'c'"
    )
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="the planner ran it"):
        reader.execute(query)  # the route is real: not "permission denied"
    found = [f for f in _report(_login(admin, login)).findings if "ops.eqf" in f.message]
    assert found, "the estimator route was not found"
    assert all("estimator the planner runs" in f.message for f in found)
    assert through_view or any(f.fix.endswith("SET (RESTRICT = NONE, JOIN = NONE)") for f in found)
    with pg_admin(admin) as c:
        c.execute("ALTER OPERATOR ops.=# (text, text) SET (RESTRICT = NONE, JOIN = NONE)")
    assert not [f for f in _report(_login(admin, login)).findings if "ops.eqf" in f.message]
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="permission denied"):
        reader.execute(query)  # now the executor's check is the first to meet it


@pytest.mark.postgres
@pytest.mark.parametrize("link", ["COMMUTATOR", "NEGATOR"])
def test_postgres_estimator_reaches_a_hidden_commutator_or_negator(pg_db: tuple[str, str], link: str) -> None:
    # A visible operator over a built-in function, whose estimator commutes (`'c' < col`) or negates
    # (`NOT (col > 'c')`) to an operator in a schema the reader cannot use (red team v10 F1).
    admin, tag = pg_db
    login = f"mk_lp_{tag}_c"
    hidden = ">%" if link == "COMMUTATOR" else "<=%"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA hid; CREATE SCHEMA pub; CREATE SCHEMA app;"
            "CREATE FUNCTION hid.f(a text, b text) RETURNS bool LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'the planner ran it'; END $$;"
            "REVOKE EXECUTE ON FUNCTION hid.f(text, text) FROM PUBLIC;"
            f"CREATE OPERATOR hid.{hidden} (LEFTARG = text, RIGHTARG = text, FUNCTION = hid.f,"
            " RESTRICT = scalargtsel);"
            "CREATE OPERATOR pub.<% (LEFTARG = text, RIGHTARG = text, FUNCTION = text_lt,"
            f" RESTRICT = scalarltsel, {link} = OPERATOR(hid.{hidden}));"
            "CREATE TABLE app.t AS SELECT 'n' || g AS note FROM generate_series(1, 50) g; ANALYZE app.t;"
        )
        c.execute(f"GRANT USAGE ON SCHEMA app, pub TO {login}")
        c.execute(f"GRANT SELECT ON app.t TO {login}")
    query = (
        "SELECT count(*) FROM app.t WHERE 'n5' OPERATOR(pub.<%) note"
        if link == "COMMUTATOR"
        else "SELECT count(*) FROM app.t WHERE NOT (note OPERATOR(pub.<%) 'n5')"
    )
    if link == "COMMUTATOR":  # the route is real (a NEGATOR's planner call is shown by the red team's)
        with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="the planner ran it"):
            reader.execute(query)
    found = [f for f in _report(_login(admin, login)).findings if "hid.f" in f.message]
    assert found and "pub.<%" in found[0].message, found


@pytest.mark.postgres
def test_postgres_a_types_typmod_function_is_a_route_without_execute(pg_db: tuple[str, str]) -> None:
    # `'x'::pub.citext(5)` runs the type's TYPMOD_IN as the reader, EXECUTE revoked or not, in a
    # schema it cannot use (red team v10 F2)
    admin, tag = pg_db
    login = f"mk_lp_{tag}_t"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        pg_need_extensions(c, "citext")
        c.execute(
            "CREATE SCHEMA hid; CREATE SCHEMA pub; CREATE EXTENSION citext SCHEMA pub;"
            "CREATE FUNCTION hid.tm(cstring[]) RETURNS integer LANGUAGE plpgsql IMMUTABLE STRICT"
            " AS $$ BEGIN RAISE EXCEPTION 'the typmod function ran'; END $$;"
            "REVOKE EXECUTE ON FUNCTION hid.tm(cstring[]) FROM PUBLIC;"
            "ALTER TYPE pub.citext SET (TYPMOD_IN = hid.tm);"
        )
        c.execute(f"GRANT USAGE ON SCHEMA pub TO {login}")
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="the typmod function ran"):
        reader.execute("SELECT 'x'::pub.citext(5)")
    found = [f for f in _report(_login(admin, login)).findings if "hid.tm" in f.message]
    assert found and "type pub.citext" in found[0].message, found
    with pg_admin(admin) as c:
        c.execute("ALTER TYPE pub.citext SET (TYPMOD_IN = NONE)")
    assert not [f for f in _report(_login(admin, login)).findings if "hid.tm" in f.message]


@pytest.mark.postgres
def test_postgres_one_fix_for_two_routes_is_printed_once(pg_db: tuple[str, str]) -> None:
    # Two domains whose CHECK calls one volatile function in a schema the login cannot use:
    # two routes, one statement that stops both.
    admin, tag = pg_db
    login = f"mk_lp_{tag}_r"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA priv; CREATE SCHEMA app;"
            "CREATE FUNCTION priv.side(text) RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT true';"
            "CREATE DOMAIN app.d1 AS text CHECK (priv.side(VALUE));"
            "CREATE DOMAIN app.d2 AS text CHECK (priv.side(VALUE));"
        )
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}")
    report = _report(_login(admin, login))
    raw = [f.fix for f in report.findings if "priv.side" in f.fix]
    assert len(raw) >= 2 and len(set(raw)) == 1, report.findings  # two routes, one fix
    with pytest.raises(SqlConfigError) as refused:
        ensure_safe_account(report)
    lines = [line for line in str(refused.value).splitlines()[1:] if "priv.side" in line]
    assert len(lines) == 1 and "app.d1" in lines[0] and "app.d2" in lines[0], lines
    with pg_admin(admin) as c:
        c.execute(raw[0])
    assert not [f for f in _report(_login(admin, login)).findings if "priv.side" in f.fix]


# --- MariaDB --------------------------------------------------------------------------------------


@pytest.fixture
def mysql_accounts(mysql_url: str) -> Iterator[str]:
    tag = secrets.token_hex(4)
    admin = mysql_admin(mysql_url)
    with admin.cursor() as c:
        c.execute(f"CREATE DATABASE mk_lp_{tag}_db")
    yield tag
    with admin.cursor() as c:
        c.execute(f"DROP DATABASE mk_lp_{tag}_db")
        c.execute("SELECT User FROM mysql.user WHERE User LIKE %s", [f"mk_lp_{tag}_%"])
        for (name,) in c.fetchall():
            c.execute(f"DROP USER IF EXISTS '{name}'@'%'")
            c.execute(f"DROP ROLE IF EXISTS {name}")
    admin.close()


def _mysql_run(url: str, *statements: str) -> None:
    admin = mysql_admin(url)
    with admin.cursor() as c:
        for sql in statements:
            c.execute(sql)
    admin.close()


def _mysql_login(url: str, user: str) -> str:
    db = user.rsplit("_", 1)[0] + "_db"
    _mysql_run(url, f"GRANT SELECT ON {db}.* TO '{user}'@'%'")
    return make_url(url).set(username=user, password=None, database=db).render_as_string(False)


ADMIN_CODES = ("mysql:file", "mysql:super", "mysql:process")


@pytest.mark.mysql
def test_mariadb_file_super_process_on_the_login_refused_then_clean(
    mysql_url: str, mysql_accounts: str
) -> None:
    user = f"mk_lp_{mysql_accounts}_u"
    _mysql_run(mysql_url, f"CREATE USER '{user}'@'%'", f"GRANT FILE, SUPER, PROCESS ON *.* TO '{user}'@'%'")
    report = _report(_mysql_login(mysql_url, user))
    fixes = {f.code: f.fix for f in report.findings if f.code in ADMIN_CODES}
    assert set(fixes) == set(ADMIN_CODES), report.findings
    for fix in fixes.values():
        assert "; " not in fix and fix.endswith(f"FROM `{user}`@`%`"), fix
    _mysql_run(mysql_url, *fixes.values())
    assert _by_code(_report(_mysql_login(mysql_url, user)), *ADMIN_CODES) == {}


@pytest.mark.mysql
@pytest.mark.parametrize("default_role", [True, False], ids=["default-role", "role-not-enabled"])
def test_mariadb_file_super_process_through_roles_refused_then_clean(
    mysql_url: str, mysql_accounts: str, default_role: bool
) -> None:
    user, outer, inner = (f"mk_lp_{mysql_accounts}_{s}" for s in ("v", "r", "n"))
    _mysql_run(
        mysql_url,
        f"CREATE ROLE {inner}",
        f"CREATE ROLE {outer}",
        f"GRANT FILE, SUPER, PROCESS ON *.* TO {inner}",
        f"GRANT {inner} TO {outer}",
        f"CREATE USER '{user}'@'%'",
        f"GRANT {outer} TO '{user}'@'%'",
        *([f"SET DEFAULT ROLE {outer} FOR '{user}'@'%'"] if default_role else []),
    )
    report = _report(_mysql_login(mysql_url, user))
    found = {f.code: f for f in report.findings if f.code in ADMIN_CODES}
    assert set(found) == set(ADMIN_CODES), report.findings
    for f in found.values():
        assert f"through role `{inner}`" in f.message and f.fix.endswith(f"ON *.* FROM `{inner}`"), f
    with pytest.raises(SqlConfigError, match="holds FILE through role"):
        ensure_safe_account(report)
    _mysql_run(mysql_url, *(f.fix for f in found.values()))
    assert _by_code(_report(_mysql_login(mysql_url, user)), *ADMIN_CODES) == {}


def _limit_findings(url: str, budget: ConnectionBudget) -> list[str]:
    engine = SqlEngine(url, pool_size=budget.pool_size)
    try:
        report = inspect_account(engine, connections=budget)
    finally:
        engine.close()
    return [f.line() for f in report.findings if f.code == "mysql:connection-limit"]


@pytest.mark.mysql
def test_mariadb_connection_limit_refused_then_clean(mysql_url: str, mysql_accounts: str) -> None:
    # A runaway string search outlives its call; MAX_USER_CONNECTIONS is what bounds how many
    # server threads the calls keep busy, so serve needs it between what it opens and a margin.
    user = f"mk_lp_{mysql_accounts}_c"
    _mysql_run(mysql_url, f"CREATE USER '{user}'@'%'")
    url = _mysql_login(mysql_url, user)
    one = ConnectionBudget(5)  # 5 pooled, 1 for the watchdog's KILL: 6 to 8 accepted, 7 printed
    fix = f"ALTER USER '{user}'@'%' WITH MAX_USER_CONNECTIONS 7"
    assert _limit_findings(url, one) == [
        f"{user}@% has no connection limit (a statement that ignores its timeout holds a server thread"
        f" after its call; the limit bounds how many): {fix} (or --allow connection-limit)"
    ]
    for limit, word in ((50, "more than"), (5, "fewer than")):
        _mysql_run(mysql_url, f"ALTER USER '{user}'@'%' WITH MAX_USER_CONNECTIONS {limit}")
        (line,) = _limit_findings(url, one)
        assert f"may hold {limit} connections, {word} the 6 connections" in line and fix in line, line
    _mysql_run(mysql_url, fix)
    assert _limit_findings(url, one) == []
    # two sources logging in as one user share its limit: 2 x 5 + 1 = 11 to 13
    (line,) = _limit_findings(url, ConnectionBudget(5, sources=2))
    assert "2 x --pool-size 5" in line and line.endswith(
        "MAX_USER_CONNECTIONS 12 (or --allow connection-limit)"
    )
    assert _limit_findings(url, ConnectionBudget(0)) == []  # no pool: any finite limit


@pytest.mark.mysql
def test_mariadb_serve_refuses_an_unlimited_login_unless_allowed(
    mysql_url: str, mysql_accounts: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    def mcpkit(*argv: str) -> tuple[int, str, str]:  # in process: 7 fresh interpreters took 35 s alone
        return mcpkit_in_process(capsys, caplog, *argv)

    user = f"mk_lp_{mysql_accounts}_s"
    _mysql_run(mysql_url, f"CREATE USER '{user}'@'%'")
    url = _mysql_login(mysql_url, user)
    code, out, err = mcpkit("sql", "query", "--dsn", url, "SELECT 1 AS one")
    assert code == 2, out + err
    fix = f"ALTER USER '{user}'@'%' WITH MAX_USER_CONNECTIONS 7"
    assert [line for line in err.splitlines() if "connection limit" in line] == [
        f"  {user}@% has no connection limit (a statement that ignores its timeout holds a server thread"
        f" after its call; the limit bounds how many): {fix} (or --allow connection-limit)"
    ]
    code, out, err = mcpkit("sql", "query", "--dsn", url, "--allow", "connection-limit", "SELECT 1 AS one")
    assert code == 0, err
    assert "serving although" in err and "connection limit" in err
    code, out, _ = mcpkit("sql", "doctor", "--dsn", url)
    assert code == 1 and f"fail least privilege: {user}@% has no connection limit" in out
    _mysql_run(mysql_url, fix)
    assert mcpkit("sql", "query", "--dsn", url, "SELECT 1 AS one")[0] == 0
    assert mcpkit("sql", "doctor", "--dsn", url)[0] == 0
    # --pool-size counts: 7 is too many for a pool of 2 (3 to 5 accepted)
    code, out, _ = mcpkit("sql", "doctor", "--dsn", url, "--pool-size", "2")
    assert code == 1 and "MAX_USER_CONNECTIONS 4" in out, out


@pytest.mark.postgres
def test_postgres_readable_foreign_tables_refused_then_clean(pg_db: tuple[str, str], pg_url: str) -> None:
    admin, tag = pg_db
    login = f"mk_lp_{tag}_f"
    base = make_url(pg_url)
    with pg_admin(admin) as c:
        pg_need_extensions(c, "file_fdw", "postgres_fdw")
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute("CREATE EXTENSION file_fdw; CREATE EXTENSION postgres_fdw; CREATE SCHEMA app")
        c.execute("CREATE SERVER files FOREIGN DATA WRAPPER file_fdw")
        c.execute(
            "CREATE FOREIGN TABLE app.host_file (line text) SERVER files"
            " OPTIONS (filename '/etc/hostname', format 'text')"
        )
        c.execute(
            "CREATE SERVER other FOREIGN DATA WRAPPER postgres_fdw"
            f" OPTIONS (host '{base.host}', port '{base.port or 5432}', dbname '{base.database}')"
        )
        c.execute(f"CREATE USER MAPPING FOR {login} SERVER other OPTIONS (user 'postgres')")
        c.execute(
            "CREATE FOREIGN TABLE app.remote_roles (rolname text) SERVER other"
            " OPTIONS (schema_name 'pg_catalog', table_name 'pg_roles')"
        )
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}")
        c.execute(f"GRANT SELECT ON app.host_file, app.remote_roles TO {login}")
    url = _login(admin, login)
    engine = SqlEngine(url)
    try:  # as found, the reader reads a server file through the foreign table
        with engine.session(10.0, "fdw") as (conn, _):
            assert conn.exec_driver_sql("SELECT count(*) FROM app.host_file").scalar() >= 1
    finally:
        engine.close()
    report = _report(url)
    found = {
        f.message.split(" (server")[0].rsplit(" ", 1)[1]: f
        for f in report.findings
        if f.code == "foreign-table"
    }
    assert set(found) == {"app.host_file", "app.remote_roles"}, report.findings
    assert (
        "file_fdw" in found["app.host_file"].message and "postgres_fdw" in found["app.remote_roles"].message
    )
    with pytest.raises(SqlConfigError, match=re.escape("foreign table app.host_file")):
        ensure_safe_account(report)
    assert found["app.host_file"].opt_in == "foreign-table:app.host_file"  # an opt-in names one
    with pg_admin(admin) as c:
        for f in found.values():
            c.execute(f.fix)
    assert not [f for f in _report(url).findings if f.code == "foreign-table"]


@pytest.mark.postgres
def test_one_option_reopens_a_function_for_start_up_and_queries(
    pg_db: tuple[str, str], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # --allow function:S.N and --allow-function S.N used to be two halves of one decision.
    admin, tag = pg_db
    login = f"mk_lp_{tag}_o"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA app; CREATE FUNCTION app.f() RETURNS int LANGUAGE sql STABLE SECURITY DEFINER"
            " AS 'SELECT 41 + 1'"
        )
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}")
    url = _login(admin, login)
    code, _, err = mcpkit_in_process(capsys, caplog, "sql", "query", "--dsn", url, "SELECT app.f() AS x")
    assert code == 2 and "function app.f() runs as its owner" in err
    for option in (["--allow", "function:app.f"], ["--allow-function", "app.f"]):
        code, out, err = mcpkit_in_process(
            capsys, caplog, "sql", "query", "--dsn", url, *option, "SELECT app.f() AS x"
        )
        assert code == 0 and "42" in out, (option, err)


@pytest.mark.postgres
def test_postgres_audit_and_admission_share_one_never_list(pg_db: tuple[str, str]) -> None:
    # One source: every pg_catalog function admission never allows is unreachable for the start-up
    # audit too. pg_lock_status (other sessions' locks) was allowed to views by the audit's own list.
    admin, tag = pg_db
    with pg_admin(admin) as c:
        names = {
            r[0]
            for r in c.execute("SELECT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace")
        }
    never = {n for n in names if (f := POSTGRES.lookup(n)) is not None and f.verdict == "never"}
    assert {n for n in names if unreachable_reason(n)} == never and "pg_lock_status" in never
    login = f"mk_lp_{tag}_l"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute("CREATE SCHEMA app; CREATE VIEW app.locks AS SELECT count(*) AS n FROM pg_lock_status() l")
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}; GRANT SELECT ON app.locks TO {login}")
    lines = [f.line() for f in _report(_login(admin, login)).findings]
    assert any("relation app.locks runs pg_catalog.pg_lock_status" in line for line in lines), lines


# --- MariaDB: what a granted role brings, enabled or not (issue 10) ------------------------------


def _mysql_reader(url: str, tag: str, *, default_role: bool) -> tuple[str, str, str, str]:
    """A login granted `outer` (its default role or not), `inner` granted to `outer`, and a table of
    its own only, in the test's database (which holds a DEFINER function and a DEFINER view)."""
    db = f"mk_lp_{tag}_db"
    user, outer, inner = (f"mk_lp_{tag}_{s}" for s in ("w", "ro", "ri"))
    _mysql_run(
        url,
        f"CREATE TABLE {db}.t (a int)",
        f"CREATE FUNCTION {db}.f() RETURNS INT SQL SECURITY DEFINER RETURN 1",
        f"CREATE SQL SECURITY DEFINER VIEW {db}.v AS SELECT a FROM {db}.t",
        f"CREATE ROLE {inner}",
        f"CREATE ROLE {outer}",
        f"GRANT {inner} TO {outer}",
        f"CREATE USER '{user}'@'%'",
        f"GRANT {outer} TO '{user}'@'%'",
        f"GRANT SELECT ON {db}.t TO '{user}'@'%'",
        *([f"SET DEFAULT ROLE {outer} FOR '{user}'@'%'"] if default_role else []),
    )
    login = make_url(url).set(username=user, password=None, database=db).render_as_string(False)
    return login, db, outer, inner


def _current_role(conn: object) -> object:
    return conn.exec_driver_sql("SELECT CURRENT_ROLE()").scalar()  # type: ignore[attr-defined]


@pytest.mark.mysql
@pytest.mark.parametrize("default_role", [True, False], ids=["default-role", "role-not-enabled"])
def test_mariadb_definer_routine_and_view_through_a_nested_role_refused_then_clean(
    mysql_url: str, mysql_accounts: str, default_role: bool
) -> None:
    login, db, _, inner = _mysql_reader(mysql_url, mysql_accounts, default_role=default_role)
    _mysql_run(
        mysql_url, f"GRANT EXECUTE ON FUNCTION {db}.f TO {inner}", f"GRANT SELECT ON {db}.v TO {inner}"
    )
    report = _report(login)
    found = {f.code: f for f in report.findings if f.code in ("definer-routine", "definer-view")}
    assert set(found) == {"definer-routine", "definer-view"}, report.findings
    assert f"function {db}.f" in found["definer-routine"].message
    assert f"view {db}.v" in found["definer-view"].message
    routine_fix = found["definer-routine"].fix.split("; or ")[0]
    view_fix = found["definer-view"].fix.split("; or ")[1]
    assert routine_fix == f"REVOKE EXECUTE ON FUNCTION `{db}`.`f` FROM `{inner}`", routine_fix
    assert view_fix == f"REVOKE SELECT ON `{db}`.`v` FROM `{inner}`", view_fix
    with pytest.raises(SqlConfigError, match="which runs as its definer"):
        ensure_safe_account(report)
    _mysql_run(mysql_url, routine_fix, view_fix)
    assert [f for f in _report(login).findings if f.code.startswith("definer")] == []


@pytest.mark.mysql
@pytest.mark.parametrize("default_role", [True, False], ids=["default-role", "role-not-enabled"])
def test_mariadb_the_sessions_role_is_restored_exactly_also_on_error(
    mysql_url: str, mysql_accounts: str, default_role: bool
) -> None:
    from mcpkit.sql.profiles.mysql.account import inspect_mysql
    from mcpkit.sql.profiles.mysql.roles import under_each_role

    login, _, outer, inner = _mysql_reader(mysql_url, mysql_accounts, default_role=default_role)
    _mysql_run(mysql_url, f"GRANT FILE ON *.* TO {inner}")
    engine = SqlEngine(login, pool_size=1)
    try:
        with engine.session(10.0, "t") as (conn, dbapi):
            before = _current_role(conn)
            assert before == (outer if default_role else None)
            assert any(f.code == "mysql:file" for f in inspect_mysql(conn).findings)
            assert _current_role(conn) == before
            engine.profile.catalog_fingerprint(dbapi)
            assert _current_role(conn) == before

            def run(sql: str) -> list[tuple[object, ...]]:
                result = conn.exec_driver_sql(sql)
                return [tuple(r) for r in result.all()] if result.returns_rows else []

            with pytest.raises(Exception, match="mk_lp_no_such_table"):
                under_each_role(run, [outer], ["SELECT * FROM mk_lp_no_such_table"])
            assert _current_role(conn) == before
            conn.exec_driver_sql("SET ROLE NONE" if default_role else f"SET ROLE {outer}")
            changed = _current_role(conn)
            with pytest.raises(Exception, match="mk_lp_no_such_table"):
                under_each_role(run, [outer], ["SELECT * FROM mk_lp_no_such_table"])
            assert _current_role(conn) == changed
            conn.exec_driver_sql(f"SET ROLE {outer}" if default_role else "SET ROLE NONE")
        with engine.session(10.0, "t2") as (conn, _):  # the pooled connection, as the login left it
            assert _current_role(conn) == before
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_role_revoked_while_enabled_fails_the_call_retryably_and_drops_the_connection(
    mysql_url: str, mysql_accounts: str
) -> None:
    # The session's default role is revoked while the pooled connection has it enabled: reading
    # the fingerprint enables the other granted role, then cannot enable the revoked one again.
    from mcpkit.sql.errors import QueryFailed
    from mcpkit.sql.reverify import Guard

    login, _, outer, _ = _mysql_reader(mysql_url, mysql_accounts, default_role=True)
    user, other = f"mk_lp_{mysql_accounts}_w", f"mk_lp_{mysql_accounts}_rx"
    _mysql_run(mysql_url, f"CREATE ROLE {other}", f"GRANT {other} TO '{user}'@'%'")
    engine = SqlEngine(login, pool_size=1)
    engine.guard = Guard(lambda _engine, _conn: None, "mariadb test", every_s=0)
    try:
        with engine.session(10.0, "c1") as (conn, _):
            assert _current_role(conn) == outer
        _mysql_run(mysql_url, f"REVOKE {outer} FROM '{user}'@'%'")
        with pytest.raises(QueryFailed) as failed, engine.session(10.0, "c2"):
            pass
        assert failed.value.kind == "connection" and failed.value.retryable
        with engine.session(10.0, "c3") as (conn, _):  # a new connection, not the one left in `other`
            assert _current_role(conn) is None
    finally:
        engine.close()


@pytest.mark.mysql
@pytest.mark.parametrize("default_role", [True, False], ids=["default-role", "role-not-enabled"])
def test_mariadb_fingerprint_sees_changes_to_a_nested_role(
    mysql_url: str, mysql_accounts: str, default_role: bool
) -> None:
    login, db, _, inner = _mysql_reader(mysql_url, mysql_accounts, default_role=default_role)
    engine = SqlEngine(login, pool_size=1)

    def fingerprint() -> str | None:
        with engine.session(10.0, "fp") as (_, dbapi):
            return engine.profile.catalog_fingerprint(dbapi)

    try:
        clean = fingerprint()
        assert fingerprint() == clean
        for change, undo in (
            (f"GRANT FILE ON *.* TO {inner}", f"REVOKE FILE ON *.* FROM {inner}"),
            (f"GRANT SELECT ON {db}.v TO {inner}", f"REVOKE SELECT ON {db}.v FROM {inner}"),
            (f"GRANT EXECUTE ON FUNCTION {db}.f TO {inner}", None),
            # seen only through the role: its SQL SECURITY
            (f"ALTER FUNCTION {db}.f SQL SECURITY INVOKER", None),
        ):
            _mysql_run(mysql_url, change)
            changed = fingerprint()
            assert changed != clean, change
            if undo is None:
                clean = changed
                continue
            _mysql_run(mysql_url, undo)
            assert fingerprint() == clean, undo
    finally:
        engine.close()


@pytest.mark.mysql
@pytest.mark.serial  # a grant to PUBLIC reaches every login of the server
def test_mariadb_definer_function_granted_to_public_is_refused_though_the_login_cannot_list_it(
    mysql_url: str, mysql_accounts: str
) -> None:
    # information_schema.ROUTINES does not list a routine granted to PUBLIC one by one; the login
    # may run it all the same (here: root's LOAD_FILE). PUBLIC is server-wide: granted briefly.
    login, db, _, _ = _mysql_reader(mysql_url, mysql_accounts, default_role=False)
    _mysql_run(
        mysql_url,
        f"CREATE FUNCTION {db}.g() RETURNS TEXT SQL SECURITY DEFINER RETURN LOAD_FILE('/etc/hostname')",
    )
    try:
        _mysql_run(mysql_url, f"GRANT EXECUTE ON FUNCTION {db}.g TO PUBLIC")
        report = _report(login)
    finally:
        _mysql_run(mysql_url, f"REVOKE EXECUTE ON FUNCTION {db}.g FROM PUBLIC")
    found = [f for f in report.findings if f.code == "definer-routine"]
    assert [f.fix for f in found] == [f"REVOKE EXECUTE ON FUNCTION `{db}`.`g` FROM PUBLIC"], report.findings
    assert "granted to PUBLIC" in found[0].message and found[0].opt_in == f"routine:{db}.g"
    assert [f for f in _report(login).findings if f.code.startswith("definer")] == []


@pytest.mark.postgres
def test_postgres_connection_limit_is_warned_not_refused_then_clean(
    pg_db: tuple[str, str], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # LIKE over a long pattern ignores cancel: its backend outlives the call, and the login's
    # CONNECTION LIMIT is what bounds how many. Advised, not required (existing logins have none).
    admin, tag = pg_db
    role = f"mk_lp_{tag}_l"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {role} LOGIN")
    url = _login(admin, role)
    fix = f"ALTER ROLE {role} CONNECTION LIMIT 7"  # 5 pooled, +1 as MariaDB's budget, +1

    def warnings(login: str, pool_size: int = 5) -> list[str]:
        engine = SqlEngine(login, pool_size=pool_size)
        try:
            report = inspect_account(engine, connections=ConnectionBudget(pool_size))
        finally:
            engine.close()
        assert not [f for f in report.findings if "connection" in f.code]  # never a refusal
        with caplog.at_level("WARNING", logger="mcpkit.sql"):
            caplog.clear()
            ensure_safe_account(report)  # start-up passes, and logs each warning
        told = [w.line() for w in report.warnings if w.code == "postgres:connection-limit"]
        assert [r.getMessage() for r in caplog.records if "connection" in r.getMessage()] == told
        return told

    assert warnings(url) == [
        f"{role} has no connection limit (a statement that ignores its timeout and cancel keeps its"
        f" backend busy after its call; the limit bounds how many): {fix}"
    ]
    code, doctor, _ = mcpkit_in_process(capsys, caplog, "sql", "doctor", "--dsn", url)
    assert code == 0, doctor
    assert f"warn connection limit: {role} has no connection limit" in doctor, doctor
    assert doctor.rstrip().count(fix) == 1, doctor
    with pg_admin(admin) as c:
        c.execute(f"ALTER ROLE {role} CONNECTION LIMIT 50")
    assert [w.split(" (")[0] for w in warnings(url)] == [
        f"{role} may hold 50 connections, more than the 6 connections the server opens"
    ]
    with pg_admin(admin) as c:
        c.execute(fix)
    assert warnings(url) == []
    assert warnings(url, pool_size=0) == []  # one connection per call: any finite limit
    _, doctor, _ = mcpkit_in_process(capsys, caplog, "sql", "doctor", "--dsn", url)
    assert "connection limit" not in doctor, doctor
    # a superuser (the administrator here) is told that the limit does not bind it
    engine = SqlEngine(admin)
    try:
        told = inspect_account(engine, connections=ConnectionBudget(5)).warnings
    finally:
        engine.close()
    told = [w for w in told if w.code not in ("postgres:temp-file-limit", "postgres:error-log")]  # own tests
    assert [w.code for w in told] == ["postgres:connection-limit"], told
    assert told[0].message.endswith("; it is a superuser, which PostgreSQL lets past any connection limit")


@pytest.mark.postgres
@pytest.mark.parametrize(
    "route", ["negator-in-query", "negator-in-policy", "returned-domain", "returned-range"]
)
def test_postgres_negator_and_returned_domain_are_routes(pg_db: tuple[str, str], route: str) -> None:
    # Red team pg13: the planner rewrites `NOT (a op b)` to `a negator b` for an operator without
    # estimators (F7), and a function's returned domain has its CHECK run (F9); each ran a plpgsql
    # function in a schema the reader cannot use, EXECUTE left to PUBLIC, while doctor said ok; a
    # range returned into a statistics expression has its subtype_diff run by the planner (F3).
    admin, tag = pg_db
    login = f"mk_lp_{tag}_n"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA hid; CREATE SCHEMA app;"
            "CREATE FUNCTION hid.f(a text, b text) RETURNS bool LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'the hidden function ran'; END $$;"
            "CREATE FUNCTION hid.chk(v int) RETURNS bool LANGUAGE plpgsql IMMUTABLE"
            " AS $$ BEGIN RAISE EXCEPTION 'the hidden function ran'; END $$;"
            "CREATE OPERATOR hid.!== (LEFTARG = text, RIGHTARG = text, FUNCTION = hid.f);"
            "CREATE OPERATOR app.=== (LEFTARG = text, RIGHTARG = text, FUNCTION = texteq,"
            " NEGATOR = OPERATOR(hid.!==));"
            "CREATE DOMAIN hid.dint AS int CHECK (hid.chk(VALUE));"
            "CREATE FUNCTION app.bucket(v int) RETURNS hid.dint LANGUAGE sql IMMUTABLE"
            " BEGIN ATOMIC SELECT v % 10; END;"
            "CREATE TABLE app.t AS SELECT 'n' || g AS note, g AS id FROM generate_series(1, 20) g;"
        )
        if route == "returned-range":
            c.execute(
                "CREATE FUNCTION hid.fdiff(a float8, b float8) RETURNS float8 LANGUAGE plpgsql IMMUTABLE"
                " AS $$"
                f" BEGIN IF current_user = '{login}' THEN RAISE EXCEPTION 'the hidden function ran'; END IF;"
                " RETURN b - a; END $$;"
                "CREATE TYPE hid.frange AS RANGE (SUBTYPE = float8, SUBTYPE_DIFF = hid.fdiff);"
                "CREATE OPERATOR app.<-> (LEFTARG = float8, RIGHTARG = float8, FUNCTION = hid.frange);"
                "CREATE TABLE app.s AS SELECT g::float8 AS lo, g + 5::float8 AS hi"
                " FROM generate_series(1, 200) g;"
                "CREATE STATISTICS app.s_st ON ((lo OPERATOR(app.<->) hi)) FROM app.s; ANALYZE app.s;"
            )
            c.execute(f"GRANT SELECT ON app.s TO {login}")
        if route == "negator-in-policy":
            c.execute(
                "ALTER TABLE app.t ENABLE ROW LEVEL SECURITY;"
                "CREATE POLICY p ON app.t FOR SELECT USING (NOT (note OPERATOR(app.===) 'n5'))"
            )
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}")
        c.execute(f"GRANT SELECT ON app.t TO {login}")
    query = {
        "negator-in-query": "SELECT count(*) FROM app.t WHERE NOT (note OPERATOR(app.===) 'n5')",
        "negator-in-policy": "SELECT count(*) FROM app.t",
        "returned-domain": "SELECT app.bucket(id) FROM app.t WHERE id = 7",
        "returned-range": "SELECT count(*) FROM app.s WHERE (lo OPERATOR(app.<->) hi) && '[10,20)'",
    }[route]
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="the hidden function ran"):
        reader.execute(query)  # the route is real
    hidden = {"returned-domain": "hid.chk", "returned-range": "hid.fdiff"}.get(route, "hid.f")
    found = [f for f in _report(_login(admin, login)).findings if hidden in f.message]
    assert found, "the route was not found"
    if route == "returned-range":  # no EXECUTE check on the way: only removing the route closes it
        return
    with pg_admin(admin) as c:  # every step is checked for EXECUTE: revoking it closes the route
        args = "int" if hidden == "hid.chk" else "text, text"
        c.execute(f"REVOKE EXECUTE ON FUNCTION {hidden}({args}) FROM PUBLIC")
    assert not [f for f in _report(_login(admin, login)).findings if hidden in f.message]
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="permission denied"):
        reader.execute(query)  # the printed fix closes it in the database


@pytest.mark.postgres
@pytest.mark.parametrize(
    "route", ["returned-composite", "operator-composite", "aggregate-initcond", "view-coldef"]
)
def test_postgres_types_inside_composites_aggregates_and_trees_are_routes(
    pg_db: tuple[str, str], route: str
) -> None:
    # Red team pg14 F1-F3, F6: a domain's CHECK ran a hidden plpgsql function (EXECUTE left to
    # PUBLIC) through a returned composite's attribute, an operator returning one, an aggregate's
    # INITCOND (read by its transition type's input) and a view's column definition list; the
    # audit followed only domains returned directly and result types of stored trees.
    admin, tag = pg_db
    login = f"mk_lp_{tag}_c"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA hid; CREATE SCHEMA app;"
            "CREATE FUNCTION hid.chk(v int) RETURNS bool LANGUAGE plpgsql IMMUTABLE AS $$"
            f" BEGIN IF current_user = '{login}' THEN RAISE EXCEPTION 'the hidden function ran'; END IF;"
            " RETURN true; END $$;"
            "CREATE DOMAIN hid.dint AS int CHECK (hid.chk(VALUE));"
            "CREATE TYPE hid.comp AS (a hid.dint);"
            "CREATE TABLE app.t AS SELECT g AS id FROM generate_series(1, 5) g;"
        )
        entry = {
            "returned-composite": "CREATE FUNCTION app.mk() RETURNS hid.comp LANGUAGE sql IMMUTABLE"
            " BEGIN ATOMIC SELECT NULL::hid.comp; END;",
            "operator-composite": "CREATE FUNCTION hid.mk2(int, int) RETURNS hid.comp LANGUAGE sql IMMUTABLE"
            " BEGIN ATOMIC SELECT NULL::hid.comp; END;"
            "CREATE OPERATOR app.### (LEFTARG = int, RIGHTARG = int, FUNCTION = hid.mk2);",
            "aggregate-initcond": "CREATE AGGREGATE hid.agg(int) (SFUNC = pg_catalog.trim_array,"
            " STYPE = hid.dint[], INITCOND = '{0}');"
            "CREATE VIEW app.v AS SELECT cardinality(hid.agg(0)) AS n FROM app.t;",
            "view-coldef": "CREATE VIEW app.v AS SELECT r.id FROM app.t,"
            " jsonb_to_record(jsonb_build_object('id', t.id, 'a', t.id)) AS r(id int, a hid.dint);",
        }[route]
        c.execute(entry)
        c.execute(f"GRANT USAGE ON SCHEMA app TO {login}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA app TO {login}")
    query = {
        "returned-composite": """SELECT jsonb_populate_record(app.mk(), '{"a": 1}')""",
        "operator-composite": """SELECT jsonb_populate_record(1 OPERATOR(app.###) 2, '{"a": 1}')""",
        "aggregate-initcond": "SELECT * FROM app.v",
        "view-coldef": "SELECT * FROM app.v",
    }[route]
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="the hidden function ran"):
        reader.execute(query)  # the route is real
    found = [f for f in _report(_login(admin, login)).findings if "hid.chk" in f.message]
    assert found, "the route was not found"
    with pg_admin(admin) as c:  # the CHECK's call is checked for EXECUTE: revoking it closes the route
        c.execute("REVOKE EXECUTE ON FUNCTION hid.chk(int) FROM PUBLIC")
    assert not [f for f in _report(_login(admin, login)).findings if "hid.chk" in f.message]
    with pg_admin(_login(admin, login)) as reader, pytest.raises(Exception, match="permission denied"):
        reader.execute(query)


@pytest.mark.postgres
@pytest.mark.parametrize("layout", ["inheritance", "partition"])
def test_postgres_a_parent_without_row_security_over_children_with_it_is_refused(
    pg_db: tuple[str, str], layout: str
) -> None:
    # Red team pg14 F8: RLS written on a child or partition only; PostgreSQL applies the queried
    # table's policies, so the readable parent showed bob's rows to alice while doctor said ok.
    admin, tag = pg_db
    login = f"mk_lp_{tag}_p"
    child = (
        "CREATE TABLE app.ev (owner_name text, note text);CREATE TABLE app.ev_2026 () INHERITS (app.ev);"
        if layout == "inheritance"
        else "CREATE TABLE app.ev (owner_name text, note text) PARTITION BY LIST (owner_name);"
        "CREATE TABLE app.ev_2026 PARTITION OF app.ev DEFAULT;"
    )
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            f"CREATE SCHEMA app; {child}"
            f"INSERT INTO app.ev_2026 VALUES ('{login}', 'mine'), ('bob', 'bob-private');"
            "ALTER TABLE app.ev_2026 ENABLE ROW LEVEL SECURITY;"
            "CREATE POLICY own ON app.ev_2026 USING (owner_name = current_user);"
            f"GRANT USAGE ON SCHEMA app TO {login}; GRANT SELECT ON app.ev, app.ev_2026 TO {login};"
        )
    with pg_admin(_login(admin, login)) as reader:  # the route is real
        assert [r[0] for r in reader.execute("SELECT note FROM app.ev_2026")] == ["mine"]
        assert "bob-private" in [r[0] for r in reader.execute("SELECT note FROM app.ev")]
    (found,) = [f for f in _report(_login(admin, login)).findings if f.code == "rls-parent"]
    assert "app.ev has no row-level security" in found.message and "app.ev_2026" in found.message
    with pg_admin(admin) as c:  # the printed fix: the parent gets the children's policy
        c.execute("ALTER TABLE app.ev ENABLE ROW LEVEL SECURITY")
        c.execute("CREATE POLICY own ON app.ev USING (owner_name = current_user)")
    assert not [f for f in _report(_login(admin, login)).findings if f.code == "rls-parent"]
    with pg_admin(_login(admin, login)) as reader:
        assert [r[0] for r in reader.execute("SELECT note FROM app.ev")] == ["mine"]


@pytest.mark.mysql
def test_mariadb_an_executable_invoker_function_is_refused_it_took_a_named_lock_through_a_view(
    mysql_url: str, mysql_accounts: str
) -> None:
    # Red team my14 F2: an INVOKER function the login may EXECUTE, called by an INVOKER view it may
    # read, held GET_LOCK server-wide (another application's GET_LOCK failed) with doctor ok.
    login, db, _, _ = _mysql_reader(mysql_url, mysql_accounts, default_role=False)
    user = make_url(login).username
    lock = f"{db}_lock"
    _mysql_run(
        mysql_url,
        f"CREATE FUNCTION {db}.lk() RETURNS INT SQL SECURITY INVOKER RETURN GET_LOCK('{lock}', 0)",
        f"CREATE SQL SECURITY INVOKER VIEW {db}.v_lock AS SELECT a, {db}.lk() AS l FROM {db}.t",
        f"INSERT INTO {db}.t VALUES (1)",
        f"GRANT SELECT ON {db}.v_lock TO '{user}'@'%'",
        f"GRANT EXECUTE ON FUNCTION {db}.lk TO '{user}'@'%'",
    )
    engine = SqlEngine(login, pool_size=1)
    try:  # the route is real: the view's read takes the lock, no table written
        with engine.session(10.0, "lock") as (conn, _):
            assert conn.exec_driver_sql(f"SELECT l FROM {db}.v_lock").scalar() == 1
    finally:
        engine.close()
    found = [f for f in _report(login).findings if f.code == "executable-routine"]
    assert [f.opt_in for f in found] == [f"routine:{db}.lk"], found
    assert found[0].fix == f"REVOKE EXECUTE ON FUNCTION `{db}`.`lk` FROM `{user}`@`%`", found[0].fix
    with pytest.raises(SqlConfigError, match="SQL SECURITY INVOKER"):
        ensure_safe_account(_report(login))
    # a reviewed one, by name (rt15my F3: the view itself is refused too, its definition unread)
    ensure_safe_account(_report(login), allow=[f"routine:{db}.lk", f"view:{db}.v_lock"])
    _mysql_run(mysql_url, found[0].fix)
    assert [f for f in _report(login).findings if f.code == "executable-routine"] == []
    engine = SqlEngine(login, pool_size=1)
    try:  # closed in the database: the view cannot call it any more
        with engine.session(10.0, "lock") as (conn, _), pytest.raises(Exception, match="lack rights"):
            conn.exec_driver_sql(f"SELECT l FROM {db}.v_lock").scalar()
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_a_readable_partition_of_a_parent_with_row_security_is_refused(
    pg_db: tuple[str, str],
) -> None:
    # Red team pg14 F8, the other way round: policies on the parent only; `GRANT SELECT ON ALL
    # TABLES IN SCHEMA` made the partition readable by its own name, under no policy.
    admin, tag = pg_db
    login = f"mk_lp_{tag}_q"
    with pg_admin(admin) as c:
        c.execute(f"CREATE ROLE {login} LOGIN")
        c.execute(
            "CREATE SCHEMA app;"
            "CREATE TABLE app.ev (owner_name text, note text) PARTITION BY LIST (owner_name);"
            "CREATE TABLE app.ev_all PARTITION OF app.ev DEFAULT;"
            f"INSERT INTO app.ev VALUES ('{login}', 'mine'), ('bob', 'bob-private');"
            "ALTER TABLE app.ev ENABLE ROW LEVEL SECURITY;"
            "CREATE POLICY own ON app.ev USING (owner_name = current_user);"
            f"GRANT USAGE ON SCHEMA app TO {login}; GRANT SELECT ON ALL TABLES IN SCHEMA app TO {login};"
        )
    with pg_admin(_login(admin, login)) as reader:  # the route is real
        assert [r[0] for r in reader.execute("SELECT note FROM app.ev")] == ["mine"]
        assert "bob-private" in [r[0] for r in reader.execute("SELECT note FROM app.ev_all")]
    (found,) = [f for f in _report(_login(admin, login)).findings if f.code == "rls-parent"]
    assert "app.ev_all has no row-level security while app.ev" in found.message, found
    with pg_admin(admin) as c:  # the printed fix: read it through its parent
        c.execute(found.fix.split(" (read it")[0])
    assert not [f for f in _report(_login(admin, login)).findings if f.code == "rls-parent"]
