"""Functions the view-order check could not read, and functions whose own settings undo a call's
(independent red team rt21 F3, F7), TABLESAMPLE in a stored view, and `any_value`.

F3: an allowed plpgsql function whose body reads the masked table in scan order (an index on the
masked e-mail sets it) answered the e-mail ranking while doctor said `ok`: only LANGUAGE sql bodies
were analysed. Now any other language counts as unverifiable (`--allow function-order:S.F`), and so
does a view or SQL function calling one. F7: `CREATE FUNCTION ... SET max_parallel_workers_per_gather
= 4` ran with parallel workers inside a call that pins 0; start-up now refuses such a function
(`--allow function-config:S.F`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.masking import KnownSchema, MaskPolicy, MaskRefused, plan_masking
from mcpkit.sql.masking.view_order import order_reason
from mcpkit.sql.profiles.postgres.fnconfig import CALL_SETTINGS
from mcpkit.sql.profiles.postgres.session import PINNED_SETTINGS
from tests.sql.sql_support import MysqlScratch, PgScratch, mysql_scratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

SECRET = "@secret.example"
ROWS = [(4, "Dan", "a"), (1, "Ann", "b"), (5, "Eve", "c"), (2, "Bob", "d"), (3, "Cy", "e")]
SCAN = "4,1,5,2,3"
INVOKER = "SQL SECURITY INVOKER READS SQL DATA"  # the ids in e-mail order
PLPGSQL = (
    "CREATE FUNCTION f_plp() RETURNS text STABLE LANGUAGE plpgsql AS"
    " $$ BEGIN RETURN (SELECT string_agg(id::text, ',') FROM customers); END $$"
)
PARALLEL = (
    "CREATE FUNCTION f_par() RETURNS text STABLE LANGUAGE plpgsql SET max_parallel_workers_per_gather = 4"
    " SET work_mem = '2GB' AS $$ BEGIN RETURN current_setting('max_parallel_workers_per_gather')"
    " || ',' || current_setting('work_mem'); END $$"
)


def _masks(tmp_path: Path) -> Path:
    path = tmp_path / "masks.yaml"
    path.write_text("masks:\n  - customers.email\n", encoding="utf-8")
    return path


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "fnorder") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            CREATE INDEX ON customers (email);
            INSERT INTO customers VALUES {rows};
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            """
        )
        yield db


# --- F3: a function whose body the check cannot read ------------------------------------------


@pytest.mark.postgres
def test_postgres_an_allowed_plpgsql_function_over_a_masked_table_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    pg.admin.execute(PLPGSQL)
    # a SQL function calling it, and a view calling that: each hands the order on
    pg.admin.execute("CREATE FUNCTION f_wrap() RETURNS text STABLE LANGUAGE sql AS $$SELECT f_plp()$$")
    pg.admin.execute("CREATE VIEW v_plp WITH (security_invoker = true) AS SELECT f_plp() AS s")
    pg.admin.execute(f"GRANT SELECT ON v_plp TO {pg.reader}")
    masks = str(_masks(tmp_path))
    allow = ["--allow", "function:public.f_plp", "--allow", "function:public.f_wrap"]
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow, "SELECT 1 AS x")
    assert code == 2, out
    assert (
        "function public.f_plp may answer in the scan order of a masked table: it is written in plpgsql,"
        " whose body this check cannot read" in out
    ), out
    assert "--allow function-order:public.f_plp" in out
    assert "function public.f_wrap may answer in the scan order of a masked table: it reads function" in out
    assert "view public.v_plp may answer in the scan order of a masked table: it reads function" in out
    code, out = _run(capsys, "sql", "doctor", "--dsn", pg.reader_url, "--mask", masks, *allow)
    assert "fail masks: function public.f_plp may answer in the scan order" in out, out
    opt_ins = [
        f"{k}-order:public.{n}" for k, n in [("function", "f_plp"), ("function", "f_wrap"), ("view", "v_plp")]
    ]
    with caplog.at_level(logging.WARNING, logger="mcpkit.sql"):
        code, out = _run(
            capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow,
            *[a for o in opt_ins for a in ("--allow", o)], "SELECT public.f_plp() AS s",
        )  # fmt: skip
    assert code == 0, out
    assert SCAN in out  # what the opt-in accepts: the e-mail ranking
    assert "--allow function-order:public.f_plp: function public.f_plp may answer" in caplog.text


@pytest.mark.postgres
def test_postgres_a_plpgsql_function_the_reader_cannot_run_is_not_counted(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(PLPGSQL)
    pg.admin.execute("REVOKE EXECUTE ON FUNCTION f_plp() FROM PUBLIC")
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", str(_masks(tmp_path)),
        "SELECT count(*) AS n FROM customers",
    )  # fmt: skip
    assert code == 0, out
    assert "| 5 |" in out


@pytest.mark.postgres
def test_postgres_grant_leaves_out_a_view_calling_a_plpgsql_function(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(PLPGSQL)
    pg.admin.execute("CREATE VIEW v_plp WITH (security_invoker = true) AS SELECT f_plp() AS s")
    pg.admin.execute("CREATE VIEW v_ok WITH (security_invoker = true) AS SELECT id FROM customers")
    code, out = _run(
        capsys, "sql", "grant", "--dsn", pg.admin_url, "--role", f"{pg.reader}_g",
        "--tables", "public.customers,public.v_plp,public.v_ok", "--mask", str(_masks(tmp_path)),
    )  # fmt: skip
    assert code == 0, out
    assert "ON public.v_plp TO" not in out
    assert "-- left out: view public.v_plp may answer in the scan order of a masked table" in out, out
    assert "GRANT SELECT ON public.v_ok TO" in out


# --- TABLESAMPLE in a stored view -------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_a_view_with_tablesample_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    views = {
        "v_sys": "SELECT id FROM customers TABLESAMPLE SYSTEM (50) REPEATABLE (1)",
        "v_bern": "SELECT id FROM customers TABLESAMPLE BERNOULLI (50)",
    }
    for name, sql in views.items():
        pg.admin.execute(f"CREATE VIEW {name} WITH (security_invoker = true) AS {sql}")
        pg.admin.execute(f"GRANT SELECT ON {name} TO {pg.reader}")
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", str(_masks(tmp_path)), "SELECT 1 AS x"
    )
    assert code == 2, out
    for name in views:
        assert f"view public.{name} may answer in the scan order of a masked table: TABLESAMPLE" in out, out
        assert f"--allow view-order:public.{name}" in out


# --- any_value: parse level (PostgreSQL 16+, MySQL 8) ------------------------------------------


def test_any_value_counts_as_order_dependent() -> None:
    known = KnownSchema({"c": {"id": "INT", "name": "TEXT", "email": "TEXT"}}, "postgres")
    policy = MaskPolicy.of(["c.email"])

    def pk(schema: str | None, table: str) -> list[frozenset[str]]:
        return [frozenset({"id"})]

    found = order_reason("SELECT any_value(name) AS n FROM c", "postgres", known, policy, pk)
    assert found == "aggregate any_value without an ORDER BY on a whole primary key"
    assert (
        order_reason("SELECT any_value(name ORDER BY id) AS n FROM c", "postgres", known, policy, pk) is None
    )
    schema = {"customers": {"id": "INT", "name": "TEXT", "email": "TEXT"}}
    masks = MaskPolicy.of(["customers.email"])
    for dialect in ("postgres", "mysql"):
        for sql in (
            "SELECT any_value(name) AS n FROM customers",
            "SELECT r, any_value(id) AS i FROM (SELECT name AS r, id FROM customers) t GROUP BY r",
            "SELECT any_value(id) OVER () AS i FROM customers",
        ):
            with pytest.raises(MaskRefused):
                plan_masking(sql, dialect, schema, masks)
        # its output masked: the order cannot tell anything
        assert plan_masking("SELECT any_value(email) AS e FROM customers", dialect, schema, masks).masked


# --- F7: a function's own settings ------------------------------------------------------------


def test_the_call_settings_table_holds_what_each_call_pins() -> None:
    assert {"max_parallel_workers_per_gather", "statement_timeout", "default_transaction_read_only"} <= (
        PINNED_SETTINGS & set(CALL_SETTINGS)
    )
    assert {"work_mem", "hash_mem_multiplier", "temp_file_limit", "role", "transaction_read_only"} <= set(
        CALL_SETTINGS
    )
    assert "search_path" not in CALL_SETTINGS and "application_name" not in CALL_SETTINGS


@pytest.mark.postgres
def test_postgres_a_function_setting_parallel_workers_refuses_start_up(
    pg: PgScratch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    pg.admin.execute(PARALLEL)
    # reached through a view the reader may select (not on the allowlist itself)
    pg.admin.execute(
        "CREATE FUNCTION f_view() RETURNS int STABLE LANGUAGE sql SET statement_timeout = 0"
        " BEGIN ATOMIC SELECT 1; END"
    )
    pg.admin.execute(
        "CREATE VIEW v_cfg WITH (security_invoker = true) AS SELECT f_view() AS one;"
        f" GRANT SELECT ON v_cfg TO {pg.reader}"
    )
    # executable, not allowed: attribute notation, a view or the allowed plpgsql f_par may call it
    pg.admin.execute(
        "CREATE FUNCTION f_idle() RETURNS int STABLE LANGUAGE sql SET work_mem = '1GB'"
        " BEGIN ATOMIC SELECT 1; END"
    )
    # an aggregate's transition function, which PostgreSQL runs with no EXECUTE check
    pg.admin.execute(
        "CREATE FUNCTION f_sfunc(int, int) RETURNS int IMMUTABLE LANGUAGE sql SET hash_mem_multiplier = 8"
        " BEGIN ATOMIC SELECT $1 + $2; END; REVOKE EXECUTE ON FUNCTION f_sfunc(int, int) FROM PUBLIC;"
        " CREATE AGGREGATE agg_cfg(int) (sfunc = f_sfunc, stype = int, initcond = '0');"
        " CREATE VIEW v_agg WITH (security_invoker = true) AS SELECT agg_cfg(id) AS s FROM customers;"
        f" GRANT SELECT ON v_agg TO {pg.reader}"
    )
    base = ["sql", "query", "--dsn", pg.reader_url, "--allow", "function:public.f_par"]
    code, out = _run(capsys, *base, "SELECT public.f_par() AS p")
    assert code == 2, out
    assert (
        "function public.f_par() sets max_parallel_workers_per_gather = 4 for itself, over a setting each"
        " call pins (queries may call it)" in out
    ), out
    assert "ALTER FUNCTION public.f_par() RESET max_parallel_workers_per_gather" in out
    assert "function public.f_par() sets work_mem = 2GB" in out
    assert "ALTER FUNCTION public.f_view() RESET statement_timeout" in out
    assert (
        "function public.f_sfunc(integer,integer) sets hash_mem_multiplier = 8 for itself, over the memory"
        " of each hash (a view, operator, cast, type or aggregate the role can use runs it with no EXECUTE"
        " check)" in out
    ), out
    assert "(or --allow function-config:public.f_par)" in out
    assert (
        "function public.f_idle() sets work_mem = 1GB for itself, over the memory of each sort and hash (the"
        " role may run it: attribute notation, an operator, a cast, a view or another function calls it"
        " with EXECUTE alone)" in out
    ), out
    code, out = _run(capsys, "sql", "doctor", "--dsn", pg.reader_url, *base[4:])
    assert "fail least privilege: function public.f_par() sets max_parallel_workers_per_gather" in out, out
    allow = [
        a
        for f in ("f_par", "f_view", "f_idle", "f_sfunc")
        for a in ("--allow", f"function-config:public.{f}")
    ]
    with caplog.at_level(logging.WARNING, logger="mcpkit.sql"):
        code, out = _run(capsys, *base, *allow, "SELECT public.f_par() AS p")
    assert code == 0, out
    assert "| 4,2GB |" in out  # what the opt-in accepts: the function's own settings while it runs
    assert "as --allow function-config:public.f_par asked" in caplog.text


@pytest.mark.postgres
def test_postgres_grant_leaves_a_function_s_own_setting_to_the_administrator(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        "CREATE FUNCTION f_g() RETURNS int STABLE LANGUAGE sql SET work_mem = '2GB'"
        " BEGIN ATOMIC SELECT 1; END; CREATE VIEW v_g WITH (security_invoker = true) AS SELECT f_g() AS one"
    )
    argv = ["sql", "grant", "--dsn", pg.admin_url, "--role", f"{pg.reader}_g", "--tables", "public.v_g"]
    code, out = _run(capsys, *argv)
    assert code == 2, out
    assert "cannot write a clean grant: function public.f_g() sets work_mem = 2GB" in out, out
    assert "ALTER FUNCTION public.f_g() RESET work_mem" in out
    pg.admin.execute("ALTER FUNCTION f_g() RESET work_mem")
    code, out = _run(capsys, *argv)
    assert code == 0, out
    assert "GRANT SELECT ON public.v_g TO" in out


@pytest.mark.postgres
def test_postgres_a_function_setting_work_mem_is_refused_for_a_role_map_role(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the account cannot run it, the mapped role can
    role = f"{pg.reader}_m"
    pg.admin.execute(
        # NOINHERIT first: from PostgreSQL 16 it is only the default of the grants made after it
        f"ALTER ROLE {pg.reader} NOINHERIT; CREATE ROLE {role} NOLOGIN; GRANT {role} TO {pg.reader};"
        f" GRANT USAGE ON SCHEMA public TO {role}"
    )
    try:
        pg.admin.execute(PARALLEL.replace("f_par", "f_role"))
        pg.admin.execute(
            f"REVOKE EXECUTE ON FUNCTION f_role() FROM PUBLIC; GRANT EXECUTE ON FUNCTION f_role() TO {role}"
        )
        roles = tmp_path / "roles.yaml"
        roles.write_text(f"principals:\n  alice: {role}\n", encoding="utf-8")
        code, out = _run(
            capsys, "sql", "doctor", "--dsn", pg.reader_url, "--role-map", str(roles),
            "--allow", "shared-login", "--allow", "function:public.f_role",
        )  # fmt: skip
        assert code != 0, out
        assert "function public.f_role() sets max_parallel_workers_per_gather = 4" in out, out
    finally:
        pg.admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


# --- MariaDB: a stored function reaching a masked table through another routine ---------------


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "fnorder") as db, db.admin.cursor() as c:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        c.execute(f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, name text, email varchar(80))")
        c.execute(f"CREATE INDEX by_email ON {db.db}.customers (email)")
        c.execute(f"INSERT INTO {db.db}.customers VALUES {rows}")
        c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
        yield db


@pytest.mark.mysql
def test_mariadb_a_function_reaching_a_masked_table_through_another_routine_counts(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the reader is their definer, so it reads their bodies (MariaDB 10.11 shows them to no one else):
    # f_outer and f_call name no masked table, the routines they call do
    definer = f"'{my.reader}'@'%'"
    with my.admin.cursor() as c:
        c.execute(
            f"CREATE DEFINER = {definer} FUNCTION {my.db}.f_inner() RETURNS text {INVOKER}"
            f" RETURN (SELECT group_concat(id) FROM {my.db}.customers)"
        )
        c.execute(
            f"CREATE DEFINER = {definer} FUNCTION {my.db}.f_outer() RETURNS text {INVOKER}"
            f" RETURN {my.db}.f_inner()"
        )
        c.execute(
            f"CREATE DEFINER = {definer} PROCEDURE {my.db}.p_inner(OUT s text) {INVOKER}"
            f" SELECT group_concat(id) INTO s FROM {my.db}.customers"
        )
        c.execute(
            f"CREATE DEFINER = {definer} FUNCTION {my.db}.f_call() RETURNS text {INVOKER}"
            f" BEGIN DECLARE s text; CALL {my.db}.p_inner(s); RETURN s; END"
        )
        for routine in ("FUNCTION f_inner", "FUNCTION f_outer", "FUNCTION f_call", "PROCEDURE p_inner"):
            kind, name = routine.split()
            c.execute(f"GRANT EXECUTE ON {kind} {my.db}.{name} TO '{my.reader}'@'%'")
    allow = [a for f in ("f_outer", "f_call") for a in ("--allow-function", f"{my.db}.{f}")]
    allow += [
        a for f in ("f_inner", "f_outer", "f_call", "p_inner") for a in ("--allow", f"routine:{my.db}.{f}")
    ]
    code, out = _run(
        capsys,
        "sql",
        "query",
        "--dsn",
        my.reader_url,
        "--mask",
        str(_masks(tmp_path)),
        *allow,
        "SELECT 1 AS x",
    )
    assert code == 2, out
    assert f"function {my.db}.f_outer may answer in the scan order of a masked table" in out, out
    assert f"function {my.db}.f_call may answer in the scan order of a masked table" in out, out


# --- rt24 F5: a non-SETOF SQL function keeps the first row of its last query ------------------


@pytest.mark.postgres
def test_postgres_a_scalar_sql_function_keeps_the_first_row_in_scan_order(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an implicit LIMIT 1 without ORDER BY: the rows arrive in e-mail order (ROWS), so the first
    # name is the smallest e-mail's, and first_after(k) walks the e-mail ranking
    pg.admin.execute(
        "CREATE FUNCTION first_after(skip int) RETURNS text LANGUAGE sql STABLE"
        " BEGIN ATOMIC SELECT c.name FROM public.customers c WHERE c.id > skip; END"
    )
    pg.admin.execute(  # ordered on the primary key, an aggregate, a set: no finding
        "CREATE FUNCTION by_id() RETURNS text LANGUAGE sql STABLE"
        " BEGIN ATOMIC SELECT c.name FROM public.customers c ORDER BY c.id; END;"
        "CREATE FUNCTION n_rows() RETURNS bigint LANGUAGE sql STABLE"
        " BEGIN ATOMIC SELECT count(*) FROM public.customers; END;"
        "CREATE FUNCTION all_names() RETURNS SETOF text LANGUAGE sql STABLE"
        " BEGIN ATOMIC SELECT c.name FROM public.customers c; END"
    )
    masks = str(_masks(tmp_path))
    allow = [
        a
        for f in ("first_after", "by_id", "n_rows", "all_names")
        for a in ("--allow", f"function:public.{f}")
    ]
    sql = "SELECT public.first_after(0) AS a, public.first_after(4) AS b, public.by_id() AS c"
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow, sql)
    assert code == 2, out  # before: | Dan | Eve | Ann |, the smallest e-mails
    assert "function public.first_after may answer in the scan order of a masked table: LIMIT" in out, out
    assert "--allow function-order:public.first_after" in out
    for name in ("by_id", "n_rows", "all_names"):
        assert f"function public.{name} may answer" not in out, out
