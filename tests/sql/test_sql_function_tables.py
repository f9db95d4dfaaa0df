"""The reviewed function tables against the engines' real catalogs, and the never list's refusals.

- Every function the catalog offers an analyst is classified (allowed, absent or never), and every
  allowed name exists there: a new server version's functions cannot slip through unreviewed.
- Every never-listed function is refused with a sentence naming it; no option allows it.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.admission import FunctionPolicy, admit, table_for
from mcpkit.sql.admission.function_tables.tables import TABLES
from mcpkit.sql.assemble import function_policy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import mysql_admin, pg_admin, pg_need_extensions, pg_scratch

# Functions an analyst could call: no type I/O, no operator or index support (pg_proc describes those).
_PG_CANDIDATES = """
SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %s AND p.prorettype NOT IN ('internal'::regtype, 'cstring'::regtype, 'trigger'::regtype,
  'event_trigger'::regtype, 'language_handler'::regtype, 'fdw_handler'::regtype,
  'index_am_handler'::regtype, 'table_am_handler'::regtype, 'tsm_handler'::regtype)
  AND NOT ('internal'::regtype = ANY(p.proargtypes::oid[]))
  AND NOT ('cstring'::regtype = ANY(p.proargtypes::oid[]))
  AND coalesce(obj_description(p.oid, 'pg_proc'), '') NOT LIKE 'implementation of %%'
"""
_PG_EXTENSIONS = (
    "pgcrypto",
    "pg_trgm",
    "fuzzystrmatch",
    '"uuid-ossp"',
    "tablefunc",
    "xml2",
    "dblink",
    "hstore",
    "citext",
    "intarray",
    "cube",
    "earthdistance",
    "postgres_fdw",
)
_MARIADB_CANDIDATES = """
SELECT LOWER(FUNCTION) FROM information_schema.SQL_FUNCTIONS
UNION SELECT LOWER(REPLACE(REPLACE(REPLACE(t.name, '\\\\_', '_'), ' FUNCTION', ''), ' Function', ''))
FROM mysql.help_topic t JOIN mysql.help_category c USING (help_category_id)
WHERE c.name IN ('String Functions', 'Date and Time Functions', 'Numeric Functions', 'Information Functions',
  'Miscellaneous Functions', 'Functions and Modifiers for Use with GROUP BY', 'Control flow functions')
  AND t.name NOT LIKE '%% Functions' AND t.name NOT LIKE '%%Overview%%'
"""


def _unreviewed(dialect: str, names: set[str]) -> list[str]:
    table = table_for(dialect)
    plain = {n for n in names if n.replace("_", "").isalnum()}  # help topics also name operators
    return sorted(n for n in plain if table.lookup(n) is None)


def _missing_allowed(dialect: str, names: set[str]) -> list[str]:
    table = table_for(dialect)
    listed = set().union(*(f.names for f in table.families if f.verdict == "allowed" and f.in_catalog))
    return sorted(listed - names)


@pytest.fixture(scope="module")
def pg_extension_db(pg_url: str) -> Iterator[str]:
    """A private database with the contrib extensions an operator commonly installs."""
    with pg_scratch(pg_url, "ext") as scratch:
        pg_need_extensions(scratch.admin, *(e.strip('"') for e in _PG_EXTENSIONS))
        for ext in _PG_EXTENSIONS:
            scratch.admin.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
        yield scratch.admin_url


@pytest.mark.postgres
def test_postgres_catalog_is_fully_reviewed(pg_extension_db: str) -> None:
    with pg_admin(pg_extension_db) as c:
        builtin = {r[0] for r in c.execute(_PG_CANDIDATES, ["pg_catalog"]).fetchall()}
        extension = {r[0] for r in c.execute(_PG_CANDIDATES, ["public"]).fetchall()}
        everything = {r[0] for r in c.execute("SELECT proname FROM pg_proc").fetchall()}
    assert len(builtin) > 1000 and len(extension) > 150
    assert _unreviewed("postgres", builtin | extension) == []
    assert _missing_allowed("postgres", everything) == []
    # What the issue names as never: SQL from text, transaction ids, other sessions' activity.
    never = "crosstab connectby xpath_table dblink query_to_xml txid_current pg_current_xact_id "
    never += "pg_stat_get_activity pg_sleep pg_advisory_lock pg_terminate_backend pg_read_file lo_import "
    # Cumulative statistics show other sessions' scans, writes and commits (red team 10 F2).
    never += "pg_stat_get_numscans pg_stat_get_db_xact_commit pg_stat_get_bgwriter_buf_written_clean "
    for name in (never + "xslt_process set_limit").split():
        found = table_for("postgres").lookup(name)
        assert found is not None and found.verdict == "never", name


@pytest.mark.mysql
def test_mariadb_catalog_is_fully_reviewed(mysql_url: str) -> None:
    admin = mysql_admin(mysql_url)
    try:
        with admin.cursor() as c:
            c.execute(_MARIADB_CANDIDATES)
            names = {str(r[0]).strip() for r in c.fetchall()}
    finally:
        admin.close()
    assert len(names) > 250
    assert _unreviewed("mysql", names) == []
    assert _missing_allowed("mysql", names) == []


def test_sqlite_catalog_is_fully_reviewed() -> None:
    conn = sqlite3.connect(":memory:")
    names = {r[0] for r in conn.execute("SELECT DISTINCT name FROM pragma_function_list")}
    conn.close()
    assert len(names) > 100
    assert sorted(n for n in names if table_for("sqlite").lookup(n) is None) == []
    assert _missing_allowed("sqlite", names) == []


@pytest.mark.parametrize("dialect", sorted(TABLES))
def test_no_allowed_name_is_also_never(dialect: str) -> None:
    table = TABLES[dialect]
    assert not [n for n in table.allowed if table.lookup(n) is None or table.lookup(n).verdict != "allowed"]  # type: ignore[union-attr]


NEVER_CALLS = {
    "postgres": [
        "SELECT crosstab('SELECT 1')",
        "SELECT * FROM connectby('t', 'a', 'b', '1', 0)",
        "SELECT * FROM xpath_table('id', 'x', 't', '/a', 'true')",
        "SELECT dblink('dbname=x', 'SELECT 1')",
        "SELECT query_to_xml('SELECT 1', true, true, '')",
        "SELECT txid_current()",
        "SELECT pg_current_xact_id()",
        "SELECT * FROM pg_stat_get_activity(NULL)",
        "SELECT pg_stat_get_backend_activity(1)",
        "SELECT pg_stat_get_tuples_inserted(1)",
        "SELECT pg_cancel_backend(1)",
        "SELECT pg_sleep_for('1 second')",
        "SELECT pg_try_advisory_lock(1)",
        "SELECT pg_ls_dir('.')",
        "SELECT lo_export(1, '/tmp/x')",
        "SELECT pg_catalog.set_config('role', 'x', false)",
        "SELECT \"nextval\"('s')",
    ],
    "mysql": [
        "SELECT SLEEP(1)",
        "SELECT BENCHMARK(1000, MD5('x'))",
        "SELECT GET_LOCK('x', 1)",
        "SELECT LOAD_FILE('/etc/passwd')",
        "SELECT MASTER_POS_WAIT('x', 1)",
        "SELECT LAST_INSERT_ID(5)",
        "SELECT sys_exec('id')",
    ],
    "sqlite": [
        "SELECT load_extension('x')",
        "SELECT fts3_tokenizer('simple')",
        "SELECT readfile('/etc/passwd')",
        "SELECT * FROM fsdir('.')",
        "SELECT * FROM sqlite_dbdata('main')",
        "SELECT * FROM pragma_database_list()",  # the file's path on the server
        "SELECT * FROM pragma_data_version()",
    ],
}
_NEVER_CASES = [(d, sql) for d, cases in NEVER_CALLS.items() for sql in cases]


@pytest.mark.parametrize(("dialect", "sql"), _NEVER_CASES, ids=[s for _, s in _NEVER_CASES])
def test_never_list_is_refused_naming_the_function(dialect: str, sql: str) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, dialect, limit=26)
    assert info.value.data == {"reason": "function"}
    name = sql.split("(")[0].split()[-1].split(".")[-1].strip('"').lower()
    assert f"function {name} is never allowed" in info.value.message.lower()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT file FROM pragma_database_list",
        "SELECT file FROM main.PRAGMA_DATABASE_LIST",
        'SELECT (SELECT file FROM "pragma_database_list" LIMIT 1) AS f',
        "SELECT data_version FROM pragma_data_version",  # moves when another connection commits
    ],
)
def test_sqlite_database_list_is_never_readable(sql: str) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, "sqlite", limit=26)
    assert info.value.data == {"reason": "relation"} and "never readable" in info.value.message


@pytest.mark.parametrize(
    ("dialect", "name"),
    [
        ("postgres", "pg_sleep"),
        ("postgres", "pg_*"),
        ("postgres", "pg_st*"),
        ("postgres", "dbl*"),
        ("postgres", "pg_catalog.txid_current"),
        ("postgres", "crosstab2"),
        ("mysql", "sleep"),
        ("mysql", "get_*"),
        ("sqlite", "load_extension"),
        ("sqlite", "pg_sleep"),  # every engine's never list counts
    ],
)
def test_the_operator_option_cannot_allow_the_never_list(dialect: str, name: str) -> None:
    with pytest.raises(SqlConfigError, match="never allowed"):
        FunctionPolicy.for_dialect(dialect, extra=[name])
    with pytest.raises(SqlConfigError, match="never allowed"):
        FunctionPolicy.for_dialect(dialect, allow=[name])


def test_the_operator_option_allows_by_name_schema_and_prefix() -> None:
    policy = FunctionPolicy.for_dialect("postgres", extra=["version", "app.score", "st_*"])
    for sql in ("SELECT version()", "SELECT app.score(1)", "SELECT st_area(g) FROM t", "SELECT lower(a)"):
        admit(sql, "postgres", functions=policy)
    with pytest.raises(Refused) as info:
        admit("SELECT other.score(1)", "postgres", functions=policy)
    assert "other.score" in info.value.message and "--allow-function other.score" in info.value.message
    with pytest.raises(Refused) as info:
        admit("SELECT version()", "postgres")
    assert "left out" in info.value.message and "--allow-function version" in info.value.message
    with pytest.raises(SqlConfigError):
        FunctionPolicy.for_dialect("postgres", extra=["x;drop"])
    with pytest.raises(SqlConfigError):
        FunctionPolicy.for_dialect("postgres", extra=["*"])


@pytest.mark.parametrize(
    ("dialect", "name", "sql"),
    [
        # `//a[count(//a) > 1]` costs nodes^2 per predicate and MariaDB evaluates on after a KILL
        ("mysql", "extractvalue", "SELECT extractvalue('<a>x</a>', '//a[count(//a) > 1]') AS v"),
        # libxml2 checks no cancel: `//a[. = //a]` over 30,000 nodes ran 26 s past its call's timeout
        ("postgres", "xpath", "SELECT xpath('//a[. = //a]', x) FROM t"),
        # red team my11: quadratic and unkillable (F10); NULL with no warning past the packet (F2);
        # past group_concat_max_len and max_session_mem_used, 1 GB per call (F3)
        ("mysql", "regexp_replace", "SELECT REGEXP_REPLACE(REPEAT('a', 9000000), 'a', 'bb') AS v"),
        ("mysql", "sformat", "SELECT SFORMAT('{:>17000000}', 'x') AS v"),
        ("mysql", "json_objectagg", "SELECT JSON_OBJECTAGG(a, b) AS v FROM t"),
    ],
)
def test_costly_functions_are_left_out_and_the_operator_may_allow_them(
    dialect: str, name: str, sql: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, dialect)
    assert "left out" in info.value.message and f"--allow-function {name}" in info.value.message
    admit(sql, dialect, functions=FunctionPolicy.for_dialect(dialect, extra=[name]))
    # red team my17 F7: the opt-in was taken without a word that nothing bounds the call any more
    with caplog.at_level(logging.WARNING, logger="mcpkit.sql"):
        function_policy(argparse.Namespace(functions=None, allow_function=[name]), dialect)
    assert f"{name} is allowed unbounded, although it was left out: " in caplog.text


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT setrole, setconfig FROM pg_db_role_setting",  # ALTER ROLE ... SET api_key = ...
        "SELECT prosrc FROM pg_catalog.pg_proc",  # a password written into a function body
        "SELECT rolname, rolconfig FROM pg_roles",  # the same settings through the views over it
        "SELECT useconfig FROM pg_user",
        "SELECT description FROM pg_shdescription",  # other roles' comments
        "SELECT count(*) FROM pg_stat_user_tables",
    ],
)
def test_postgres_catalogs_beyond_the_grants_are_never_readable(sql: str) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, "postgres", limit=26)
    assert info.value.data == {"reason": "relation"}


def test_pg_catalog_qualified_builtins_are_the_builtins() -> None:
    admit("SELECT pg_catalog.lower('A'), pg_catalog.count(*)", "postgres")
    with pytest.raises(Refused):
        admit("SELECT public.lower('A')", "postgres")


@pytest.mark.postgres
def test_gen_random_uuid_with_pgcrypto_installed(pg_extension_db: str) -> None:
    # pgcrypto adds a volatile public.gen_random_uuid(); the call resolves to pg_catalog's first.
    engine = SqlEngine(pg_extension_db)
    try:
        service = SqlService(engine, timeout_s=5.0)
        result, _ = service.query(
            "SELECT gen_random_uuid() AS u, digest('x', 'sha256') AS d, similarity('abc', 'abd') AS s",
            call_id="uuid",
        )
    finally:
        engine.close()
    assert len(str(result.rows[0][0])) == 36 and result.rows[0][1] == "<binary 32 bytes>"
    with psycopg.connect(make_url(pg_extension_db).set(drivername="postgresql").render_as_string(False)) as c:
        assert c.execute("SELECT count(*) FROM pg_proc WHERE proname = 'gen_random_uuid'").fetchone() == (2,)
