"""Objects that run with another role's rights, from the red team's second pass (issues 10, 11).

A view (or routine) the reader may use that runs as its definer or owner is a route around every
other check: its tables, columns, row-level security and functions are checked against someone
else. The start-up check (serve and `mcpkit sql doctor`) must find each one, refuse with the fix,
and after the fix the database itself must stop the attack; the databases' state is fingerprinted
before and after each attack.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.checks import ensure_safe_account, inspect_account
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import (
    changed,
    mcpkit_here,
    mysql_admin,
    mysql_scratch,
    mysql_snapshot,
    pg_admin,
    pg_need_extensions,
    pg_scratch,
    pg_snapshot,
)

# Fingerprints the whole server (roles, databases, settings): runs after the parallel part.
pytestmark = pytest.mark.serial

TIMEOUT_S = 5.0


def _outcome(service: SqlService, sql: str) -> str:
    try:
        rows = service.query(sql, call_id="attack", max_rows=50)[0].rows
    except Refused as exc:
        return f"refused {(exc.data or {}).get('reason')}"
    except QueryFailed as exc:
        return f"failed {exc.kind}"
    except QueryTimeout:
        return "timeout"
    return f"answered {rows!r}"


# --- MariaDB: DEFINER views (breaks 1 and 2) -------------------------------------------------


@pytest.fixture
def maria_definer(mysql_url: str) -> Iterator[tuple[str, str, str]]:
    """A database where root created DEFINER views (MariaDB's default) over mysql.user and over a
    root DEFINER function that reads a server file; the reader holds SELECT on the database only."""
    with mysql_scratch(mysql_url, "dv") as scratch:
        with scratch.admin.cursor() as c:
            db, reader = scratch.db, scratch.reader
            c.execute(f"CREATE TABLE {db}.plain (n int)")
            c.execute(f"INSERT INTO {db}.plain VALUES (1)")
            c.execute(f"GRANT SELECT ON {db}.* TO '{reader}'@'%'")
            c.execute(
                f"CREATE DEFINER=root@localhost FUNCTION {db}.cfg() RETURNS TEXT SQL SECURITY DEFINER"
                " RETURN LOAD_FILE('/etc/passwd')"
            )
            c.execute(f"CREATE DEFINER=root@localhost VIEW {db}.v_file AS SELECT {db}.cfg() AS cfg")
            c.execute(
                f"CREATE DEFINER=root@localhost VIEW {db}.v_users AS"
                " SELECT User, Host, authentication_string FROM mysql.user"
            )
            # The reader's own view runs with the reader's rights: no finding.
            c.execute(f"CREATE DEFINER='{reader}'@'%' VIEW {db}.v_own AS SELECT n FROM {db}.plain")
        yield scratch.admin_url, scratch.reader_url, db


@pytest.mark.mysql
def test_mariadb_root_definer_views_refused_then_stopped_by_the_database(
    maria_definer: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, reader_url, db = maria_definer
    doctor = mcpkit_here("sql", "doctor", "--dsn", reader_url)
    assert doctor.returncode != 0, doctor.stdout + doctor.stderr
    out = doctor.stdout + doctor.stderr
    for view in ("v_file", "v_users"):
        assert f"view {db}.{view}, which runs as its definer root@localhost" in out, out
        assert f"ALTER SQL SECURITY INVOKER VIEW `{db}`.`{view}`" in out, out
    assert "v_own" not in out, out
    engine = SqlEngine(reader_url)
    try:
        codes = {f.code for f in inspect_account(engine).findings}
        assert codes == {"definer-view"}, codes
        # --allow view:... accepts one after review: what it gives up is the definer's rights.
        opted = inspect_account(engine, allowed=[f"view:{db}.v_file", f"view:{db}.v_users"])
        assert opted.findings == []
        # The fix as printed (the definition restated), then the database stops both views.
        admin = mysql_admin(admin_url)
        with admin.cursor() as c:
            c.execute(f"ALTER SQL SECURITY INVOKER VIEW `{db}`.`v_file` AS SELECT `{db}`.cfg() AS cfg")
            c.execute(
                f"ALTER SQL SECURITY INVOKER VIEW `{db}`.`v_users` AS"
                " SELECT User, Host, authentication_string FROM mysql.user"
            )
            # rt15my F3: an INVOKER view's functions run in the reader's session, so its definition
            # is checked, which needs SHOW VIEW; v_file calls a function queries may not
            # (two views of one database unreadable: one finding, its fix one SHOW VIEW grant)
            (hidden,) = inspect_account(engine).findings
            assert (hidden.code, hidden.opt_in) == ("unreadable-view", None), hidden
            assert "v_file" in hidden.message and "v_users" in hidden.message, hidden
            assert hidden.fix.startswith(f"GRANT SHOW VIEW ON `{db}`.* TO "), hidden
            c.execute(f"GRANT SHOW VIEW ON {db}.* TO '{make_url(reader_url).username}'@'%'")
        admin.close()
        found = [(f.code, f.opt_in) for f in inspect_account(engine).findings]
        assert found == [("view-function", f"view:{db}.v_file")], found
        before = mysql_snapshot(admin_url, db, tmp_path)
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        for sql in ("SELECT cfg FROM v_file", "SELECT User, authentication_string FROM v_users"):
            outcome = _outcome(service, sql)
            assert outcome == "failed permission", (sql, outcome)
        assert _outcome(service, "SELECT n FROM v_own") == "answered [[1]]"
        assert changed(before, mysql_snapshot(admin_url, db, tmp_path)) == []
    finally:
        engine.close()


@pytest.mark.mysql
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME = 'DATADIR'",
        "SELECT * FROM INFORMATION_SCHEMA.session_variables",
        "SELECT VARIABLE_VALUE FROM `information_schema`.`SYSTEM_VARIABLES`",
    ],
)
def test_mariadb_server_variables_are_refused_like_pg_settings(
    maria_definer: tuple[str, str, str], sql: str
) -> None:
    _, reader_url, _ = maria_definer
    engine = SqlEngine(reader_url)
    try:
        outcome = _outcome(SqlService(engine, timeout_s=TIMEOUT_S), sql)
        assert outcome.startswith("refused"), outcome
    finally:
        engine.close()


# --- PostgreSQL: views that read with their owner's rights (breaks 3 and 6) ------------------


def _pg_url(admin_url: str, user: str, database: str | None = None) -> str:
    url = make_url(admin_url).set(username=user, password="pw")
    return (url.set(database=database) if database else url).render_as_string(hide_password=False)


@pytest.fixture
def pg_owner_views(pg_url: str) -> Iterator[tuple[str, str, str]]:
    """Views owned by the superuser over pg_statistic and pg_authid, a view owned by the table
    owner over a table with row-level security, and a harmless view over a table the reader reads."""
    tag = secrets.token_hex(4)
    schema, reader, owner = f"mk_ov_{tag}", f"mk_ov_{tag}_r", f"mk_ov_{tag}_o"
    admin = pg_admin(pg_url)
    admin.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'pw'")
    admin.execute(f"CREATE ROLE {owner} NOLOGIN")
    admin.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {owner}")
    admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {reader}")
    admin.execute(f"ALTER ROLE {reader} SET search_path = {schema}")
    for sql in (
        f"CREATE SEQUENCE {schema}.canary_seq",
        f"CREATE TABLE {schema}.cust (id int, name text, email text)",
        f"INSERT INTO {schema}.cust SELECT g, 'n' || g, 'ceo' || g % 2 || '@secret-corp.example'"
        " FROM generate_series(1, 200) g",
        f"ANALYZE {schema}.cust",
        f"GRANT SELECT (id, name) ON {schema}.cust TO {reader}",
        f"CREATE VIEW {schema}.column_stats AS SELECT c.relname, a.attname,"
        " s.stavalues1::text AS common_values FROM pg_statistic s JOIN pg_class c ON c.oid = s.starelid"
        " JOIN pg_attribute a ON a.attrelid = s.starelid AND a.attnum = s.staattnum",
        f"CREATE VIEW {schema}.role_list AS SELECT rolname, rolpassword FROM pg_authid",
        f"GRANT SELECT ON {schema}.column_stats, {schema}.role_list TO {reader}",
        f"SET ROLE {owner}",
        f"CREATE TABLE {schema}.deals (id int, tenant text, amount int)",
        f"INSERT INTO {schema}.deals VALUES (1, '{reader}', 10), (2, 'amer', 99999)",
        f"ALTER TABLE {schema}.deals ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_only ON {schema}.deals FOR SELECT USING (tenant = current_user)",
        f"GRANT SELECT ON {schema}.deals TO {reader}",
        f"CREATE VIEW {schema}.deals_summary AS SELECT id, tenant, amount FROM {schema}.deals",
        f"CREATE TABLE {schema}.plain (n int)",
        f"INSERT INTO {schema}.plain VALUES (7)",
        f"CREATE VIEW {schema}.plain_v AS SELECT n FROM {schema}.plain",
        f"GRANT SELECT ON {schema}.deals_summary, {schema}.plain, {schema}.plain_v TO {reader}",
        "RESET ROLE",
    ):
        admin.execute(sql)
    try:
        yield pg_url, _pg_url(pg_url, reader), schema
    finally:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
        admin.execute(f"DROP ROLE {reader}")
        admin.execute(f"DROP ROLE {owner}")
        admin.close()


@pytest.mark.postgres
def test_pg_views_with_their_owners_rights_refused_then_stopped_by_the_database(
    pg_owner_views: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_url, reader_url, schema = pg_owner_views
    doctor = mcpkit_here("sql", "doctor", "--dsn", reader_url)
    out = doctor.stdout + doctor.stderr
    assert doctor.returncode != 0, out
    assert f"view {schema}.column_stats reads its relations with its owner's rights and its owner" in out, out
    assert f"ALTER VIEW {schema}.role_list SET (security_invoker = on)" in out, out
    assert f"it reads {schema}.deals, which has row-level security" in out, out
    assert "plain_v" not in out, out
    engine = SqlEngine(reader_url)
    try:
        findings = [f for f in inspect_account(engine).findings if f.code == "owner-view"]
        assert sorted(f.opt_in or "" for f in findings) == [
            f"view:{schema}.{v}" for v in ("column_stats", "deals_summary", "role_list")
        ]
        admin = pg_admin(admin_url)
        for f in findings:  # the fix as printed
            admin.execute(f.fix.split("; or ")[0])
        admin.close()
        assert [f.line() for f in inspect_account(engine).findings if f.code == "owner-view"] == []
        before = pg_snapshot(admin_url, schema, tmp_path)
        service = SqlService(engine, timeout_s=TIMEOUT_S)
        stats = "SELECT attname, common_values FROM column_stats WHERE relname = 'cust'"
        hashes = "SELECT rolname, rolpassword FROM role_list WHERE rolpassword IS NOT NULL"
        assert _outcome(service, stats) == "failed permission"
        assert _outcome(service, hashes) == "failed permission"
        # Row-level security now applies as the reader: its own tenant only.
        assert _outcome(service, "SELECT id, amount FROM deals_summary ORDER BY id") == "answered [[1, 10]]"
        assert _outcome(service, "SELECT n FROM plain_v") == "answered [[7]]"
        assert changed(before, pg_snapshot(admin_url, schema, tmp_path)) == []
    finally:
        engine.close()


# --- PostgreSQL: memberships that SET ROLE reaches (break 5) ----------------------------------


@pytest.mark.postgres
def test_pg_noinherit_membership_in_a_powerful_or_owning_role_is_refused(pg_url: str) -> None:
    tag = secrets.token_hex(4)
    reader, su, cr, by, own, middle = (f"mk_mb_{tag}_{x}" for x in ("r", "su", "cr", "by", "own", "mid"))
    schema = f"mk_mb_{tag}"
    admin = pg_admin(pg_url)
    try:
        admin.execute(f"CREATE ROLE {reader} LOGIN PASSWORD 'pw' NOINHERIT")
        admin.execute(f"CREATE ROLE {su} SUPERUSER NOLOGIN")
        admin.execute(f"CREATE ROLE {cr} CREATEROLE NOLOGIN")
        admin.execute(f"CREATE ROLE {by} BYPASSRLS NOLOGIN")
        admin.execute(f"CREATE ROLE {own} NOLOGIN")
        admin.execute(f"CREATE ROLE {middle} NOLOGIN")
        admin.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {own}")
        admin.execute(f"CREATE TABLE {schema}.t (n int)")
        admin.execute(f"ALTER TABLE {schema}.t OWNER TO {own}")
        admin.execute(f"GRANT {su} TO {middle}")  # transitive: reader -> middle -> superuser role
        for role in (middle, cr, by, own):
            admin.execute(f"GRANT {role} TO {reader}")
        url = _pg_url(pg_url, reader)
        engine = SqlEngine(url)
        try:
            report = inspect_account(engine)
            lines = [f.line() for f in report.findings]
            assert any(f"member of {su}, which has SUPERUSER (through {middle})" in x for x in lines), lines
            assert any(f"member of {cr}, which has CREATEROLE" in x for x in lines), lines
            assert any(f"member of {by}, which has BYPASSRLS" in x for x in lines), lines
            assert any(x.startswith(f"role {reader} owns {schema}.t") for x in lines), lines
            with pytest.raises(SqlConfigError):
                ensure_safe_account(report)
            # What the membership gives: SET ROLE to a superuser, INHERIT or not.
            with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(False)) as c:
                c.execute(f"SET ROLE {su}")
                assert c.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (
                    True,
                )
            for f in report.findings:
                if f.code == "powerful-membership":
                    admin.execute(f.fix)
            admin.execute(f"REVOKE {own} FROM {reader}")
            assert inspect_account(engine).findings == []
            plain = make_url(url).set(drivername="postgresql").render_as_string(False)
            with psycopg.connect(plain) as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(f"SET ROLE {su}")
        finally:
            engine.close()
    finally:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        for role in (reader, middle, su, cr, by, own):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.close()


# --- PostgreSQL: an extension installed in pg_catalog is not a built-in (break 4) -------------


@pytest.mark.postgres
def test_pg_extension_in_pg_catalog_is_audited_like_any_other(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "xc") as scratch:
        db, database, reader, db_admin_url = scratch.admin, scratch.db, scratch.reader, scratch.admin_url
        pg_need_extensions(db, "xml2")
        for sql in (
            "CREATE EXTENSION xml2 SCHEMA pg_catalog",
            "CREATE SCHEMA app",
            "CREATE SEQUENCE app.canary_seq",
            "CREATE TABLE app.docs (id int, doc text)",
            "INSERT INTO app.docs VALUES (1, '<a>x</a>')",
            f"GRANT USAGE ON SCHEMA app TO {reader}",
            f"GRANT SELECT ON app.docs TO {reader}",
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
            f"GRANT CREATE ON DATABASE {database} TO {reader}",
            "CREATE FUNCTION public.xml_report(crit text) RETURNS TABLE(id int, a text) LANGUAGE sql STABLE"
            " BEGIN ATOMIC SELECT id, a FROM xpath_table('id', 'doc', 'app.docs', '/a', crit)"
            " AS t(id int, a text); END",
        ):
            db.execute(sql)
        url = scratch.reader_url
        allow = ["--allow-function", "public.xml_report"]
        doctor = mcpkit_here("sql", "doctor", "--dsn", url, *allow)
        out = doctor.stdout + doctor.stderr
        assert doctor.returncode != 0, out
        # Revoking xml2's functions closes the wrapper too: PostgreSQL checks EXECUTE on xpath_table
        # against the caller of public.xml_report.
        assert "functions of extension xml2: each runs SQL from a string" in out, out
        assert "xpath_table(text,text,text,text,text)" in out, out
        assert f"can CREATE schemas in database {database}" in out, out
        engine = SqlEngine(url)
        try:
            report = inspect_account(engine)
            for f in report.findings:  # the fixes as printed
                db.execute(f.fix.split("; or ")[0])
            assert inspect_account(engine).findings == []
            before = pg_snapshot(db_admin_url, "app", tmp_path)
            functions = FunctionPolicy.for_dialect("postgres", extra=["public.xml_report"])
            service = SqlService(engine, timeout_s=TIMEOUT_S, functions=functions)
            attack = (
                "SELECT id, a FROM public.xml_report('txid_current_if_assigned() IS NULL"
                " AND txid_current() > 0 AND txid_current_if_assigned() IS NOT NULL')"
            )
            assert _outcome(service, attack) == "failed permission"
            assert changed(before, pg_snapshot(db_admin_url, "app", tmp_path)) == []
        finally:
            engine.close()


@pytest.mark.postgres
def test_every_unreachable_pattern_names_a_real_function(pg_url: str) -> None:
    from fnmatch import fnmatchcase

    from mcpkit.sql.profiles.postgres.knowledge import UNREACHABLE, unreachable_reason

    admin = pg_admin(pg_url)
    try:
        names = [str(r[0]) for r in admin.execute("SELECT DISTINCT proname FROM pg_proc WHERE oid < 16384")]
    finally:
        admin.close()
    # the never list also names functions that are not built into PostgreSQL 15: extensions' (tablefunc,
    # xml2, dblink, postgres_fdw, adminpack, pg_prewarm, pg_stat_statements, pg_visibility, pg_trgm)
    # the backup functions PostgreSQL 15 renamed (older servers still have them), and newer versions' own
    from_extensions = {
        *("crosstab*", "connectby*", "xpath_table", "xslt_process", "dblink*", "postgres_fdw_*"),
        *("pg_file_*", "pg_prewarm", "pg_stat_statements_reset", "pg_truncate_visibility_map", "set_limit"),
        *("pg_start_backup", "pg_stop_backup"),
        "pg_log_standby_snapshot",  # PostgreSQL 16's
    }
    for reason, patterns in UNREACHABLE.items():
        for pattern in patterns:
            hits = [n for n in names if fnmatchcase(n, pattern)]
            assert hits or pattern in from_extensions, f"{pattern} names no function on this PostgreSQL"
            assert all(unreachable_reason(n) is not None for n in hits), (pattern, reason)


def test_allow_function_schema_name_admits_the_qualified_table_function() -> None:
    from mcpkit.sql.admission import admit

    policy = FunctionPolicy.for_dialect("postgres", extra=["public.xml_report"])
    for sql in ("SELECT id, a FROM public.xml_report('x') AS t", "SELECT public.xml_report('x')"):
        assert admit(sql, "postgres", functions=policy).sql
    for sql in ("SELECT id FROM xml_report('x')", "SELECT * FROM other.xml_report('x')"):
        with pytest.raises(Refused):
            admit(sql, "postgres", functions=policy)


@pytest.mark.postgres
def test_pg_grant_of_an_owner_rights_view_says_it_cannot_write_a_clean_grant(
    pg_owner_views: tuple[str, str, str],
) -> None:
    admin_url, _, schema = pg_owner_views
    role = f"mk_ov_{secrets.token_hex(4)}_g"
    done = mcpkit_here("sql", "grant", "--dsn", admin_url, "--role", role, "--tables", f"{schema}.role_list")
    assert done.returncode != 0
    assert "cannot write a clean grant" in done.stderr and "security_invoker" in done.stderr, done.stderr
    # Alone, even the harmless view gives more than the role could read (plain is not granted) ...
    done = mcpkit_here("sql", "grant", "--dsn", admin_url, "--role", role, "--tables", f"{schema}.plain_v")
    assert done.returncode != 0 and f"it reads {schema}.plain, which the role may not" in done.stderr
    # ... with its table, nothing.
    tables = f"{schema}.plain,{schema}.plain_v"
    done = mcpkit_here("sql", "grant", "--dsn", admin_url, "--role", role, "--tables", tables)
    assert done.returncode == 0, done.stderr
