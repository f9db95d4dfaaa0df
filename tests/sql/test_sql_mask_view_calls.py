"""A routine a view calls, evaluated with the rights the view runs with (red team rt22 F1).

MariaDB runs a routine called from a DEFINER view with the view definer's rights, whatever the
routine's own SQL SECURITY: root's DEFINER view over an INVOKER function reading the masked
`customers.email` answered the e-mails in clear while doctor said `ok masks` (the opt-ins were the
ones mcpkit printed; the printed fix for a DEFINER function, `SQL SECURITY INVOKER`, built it).
PostgreSQL runs a function a view calls as the caller unless it is SECURITY DEFINER: the same
set-up is stopped by the database there, which the PostgreSQL test pins.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.cli import main
from tests.sql.sql_support import MysqlScratch, PgScratch, mysql_scratch, pg_scratch

SECRET = "@secret.example"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _masks(tmp_path: Path, rule: str) -> str:
    path = tmp_path / "masks.yaml"
    path.write_text(f"masks:\n  - {rule}\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def maria(mysql_url: str) -> Iterator[MysqlScratch]:
    """customers.email withheld by column grants; root's DEFINER views over INVOKER functions."""
    with mysql_scratch(mysql_url, "vcalls") as db:
        d = db.db
        with db.admin.cursor() as c:
            for sql in (
                f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80))",
                f"INSERT INTO {d}.customers VALUES (1, 'Ann', 'ann{SECRET}'), (2, 'Bob', 'bob{SECRET}')",
                f"CREATE FUNCTION {d}.f_email(i int) RETURNS varchar(80) READS SQL DATA SQL SECURITY INVOKER"
                f" RETURN (SELECT email FROM {d}.customers WHERE id = i)",
                f"CREATE FUNCTION {d}.f_wrap(i int) RETURNS varchar(80) READS SQL DATA SQL SECURITY INVOKER"
                f" RETURN {d}.f_email(i)",
                f"CREATE VIEW {d}.v_domains AS SELECT id, {d}.f_email(id) AS domain FROM {d}.customers",
                # views over views, functions over functions: the definer's rights reach every level
                f"CREATE SQL SECURITY INVOKER VIEW {d}.v_inner AS SELECT id, {d}.f_wrap(id) AS w"
                f" FROM {d}.customers",
                f"CREATE VIEW {d}.v_outer AS SELECT id, w FROM {d}.v_inner",
                f"GRANT SELECT (id, name) ON {d}.customers TO '{db.reader}'@'%'",
            ):
                c.execute(sql)
            for view in ("v_domains", "v_inner", "v_outer"):
                c.execute(f"GRANT SELECT, SHOW VIEW ON {d}.{view} TO '{db.reader}'@'%'")
            for fn in ("f_email", "f_wrap"):
                c.execute(f"GRANT EXECUTE ON FUNCTION {d}.{fn} TO '{db.reader}'@'%'")
        yield db


def _allow(db: MysqlScratch) -> list[str]:
    out = []
    for view in ("v_domains", "v_inner", "v_outer"):
        out += ["--allow", f"view:{db.db}.{view}", "--allow", f"view-order:{db.db}.{view}"]
    for fn in ("f_email", "f_wrap"):
        out += ["--allow", f"routine:{db.db}.{fn}"]
    return out


@pytest.mark.mysql
def test_mariadb_definer_view_calling_an_invoker_function_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, masks = maria, _masks(tmp_path, "customers.email")
    base = ["--dsn", db.reader_url, "--mask", masks, *_allow(db)]
    for sql in ("SELECT id, domain FROM v_domains ORDER BY id", "SELECT id, w FROM v_outer ORDER BY id"):
        code, out = _run(capsys, "sql", "query", *base, sql)  # before: | 1 | ann@secret.example |
        assert code == 2 and SECRET not in out, (sql, out)
        assert f"view `{db.db}`.`v_domains`: it calls function f_email, which has a body hidden" in out, out
        assert f"view `{db.db}`.`v_outer`: it reads view v_inner, which reads a masked column" in out, out
        assert f"REVOKE SELECT ON `{db.db}`.`v_domains` FROM '{db.reader}'@'%'" in out, out
    code, out = _run(capsys, "sql", "doctor", *base)
    assert code != 0 and f"fail masks: view `{db.db}`.`v_domains`: it calls function f_email" in out, out
    code, out = _run(capsys, "sql", "query", *base[:4], "SELECT id, email FROM customers ORDER BY id")
    assert code == 2, out  # the DEFINER views are refused without their opt-in as before
    with db.admin.cursor() as c:  # the reader's own rights again: the database refuses the column
        c.execute(
            f"ALTER SQL SECURITY INVOKER VIEW {db.db}.v_domains AS SELECT id, {db.db}.f_email(id) AS domain"
            f" FROM {db.db}.customers"
        )
        c.execute(f"ALTER SQL SECURITY INVOKER VIEW {db.db}.v_outer AS SELECT id, w FROM {db.db}.v_inner")
    code, out = _run(capsys, "sql", "query", *base, "SELECT id, domain FROM v_domains ORDER BY id")
    assert SECRET not in out and "calls function" not in out, out


@pytest.mark.mysql
def test_mariadb_grant_mask_leaves_out_a_definer_view_calling_a_reading_function(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, masks = maria, _masks(tmp_path, "customers.email")
    tables = ",".join(f"{db.db}.{t}" for t in ("customers", "v_domains", "v_inner", "v_outer"))
    code, out = _run(
        capsys,
        "sql",
        "grant",
        "--dsn",
        db.admin_url,
        "--role",
        "mk_vcalls_g",
        "--tables",
        tables,
        "--mask",
        masks,
    )
    assert code == 0, out
    # a DEFINER view is left out as such before its calls are read (rtJ L1: start-up refuses it)
    assert f"-- left out: view {db.db}.v_domains runs as its definer root@" in out, out
    assert f"-- left out: view {db.db}.v_outer runs as its definer root@" in out, out
    assert (
        f"GRANT SELECT ON `{db.db}`.`v_domains`" not in out
        and f"GRANT SELECT ON `{db.db}`.`v_outer`" not in out
    )
    assert f"view {db.db}.v_inner runs as its definer" not in out, out  # INVOKER: the reader's own rights
    # but it calls a stored function over a masked table: per-row, whatever its body (rt29, rt32)
    assert f"-- left out: view {db.db}.v_inner's definition calls what a query may not" in out, out
    assert f"--allow-function {db.db}.f_wrap" in out, out


@pytest.mark.mysql
def test_mariadb_invoker_fix_for_a_definer_function_names_the_views_calling_it(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    with db.admin.cursor() as c:
        c.execute(f"ALTER FUNCTION {db.db}.f_email SQL SECURITY DEFINER")
    code, out = _run(capsys, "sql", "doctor", "--dsn", db.reader_url)
    assert (
        code != 0 and f"or ALTER FUNCTION `{db.db}`.`f_email` SQL SECURITY INVOKER; a DEFINER view" in out
    ), out


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    """A view owned by a role that reads customers.email, calling SECURITY INVOKER functions."""
    with pg_scratch(pg_url, "vcalls") as db:
        owner = f"{db.db}_own"
        db.admin.execute(
            f"""
            CREATE ROLE {owner};
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            INSERT INTO customers VALUES (1, 'Ann', 'ann{SECRET}'), (2, 'Bob', 'bob{SECRET}');
            GRANT SELECT ON customers TO {owner};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            CREATE FUNCTION f_sql(i int) RETURNS text LANGUAGE sql STABLE SECURITY INVOKER
              AS 'SELECT email FROM public.customers WHERE id = i';
            CREATE FUNCTION f_plp(i int) RETURNS text LANGUAGE plpgsql STABLE SECURITY INVOKER
              AS 'BEGIN RETURN (SELECT email FROM public.customers WHERE id = i); END';
            CREATE FUNCTION f_srf() RETURNS TABLE (id int, email text) LANGUAGE sql STABLE SECURITY INVOKER
              AS 'SELECT id, email FROM public.customers';
            CREATE VIEW v_calls AS SELECT id, f_sql(id) AS a, f_plp(id) AS b FROM customers;
            CREATE VIEW v_srf AS SELECT id, email FROM f_srf();  -- an inlined SQL function
            ALTER VIEW v_calls OWNER TO {owner};
            ALTER VIEW v_srf OWNER TO {owner};
            GRANT SELECT ON v_calls, v_srf TO {db.reader};
            """
        )
        try:
            yield db
        finally:
            db.admin.execute(f"DROP OWNED BY {owner}; DROP ROLE {owner}")


@pytest.mark.postgres
def test_postgres_owner_view_calling_an_invoker_function_runs_it_as_the_caller(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same set-up as MariaDB's: PostgreSQL checks the function's tables against the caller.
    allow = [
        f"--allow={kind}:public.{name}"
        for kind, names in (
            ("view", ("v_calls", "v_srf")),
            ("view-order", ("v_calls", "v_srf")),
            ("function", ("f_sql", "f_plp", "f_srf")),
            ("function-order", ("f_plp",)),
        )
        for name in names
    ]
    base = ["sql", "query", "--dsn", pg.reader_url, "--mask", _masks(tmp_path, "customers.email"), *allow]
    for sql in ("SELECT id, a FROM v_calls", "SELECT id, b FROM v_calls", "SELECT id, email FROM v_srf"):
        code, out = _run(capsys, *base, sql)
        # a run-time failure over a masked read reads as the data failure (red team rtA F1)
        assert code == 4 and SECRET not in out, (sql, out)
        assert "may not read something" in out or "failed on the data" in out, (sql, out)
    code, out = _run(capsys, *base, "SELECT id, email FROM customers ORDER BY id")
    assert code == 0 and out.rstrip().splitlines()[-1] == "| 2 | <masked> |", out


@pytest.mark.mysql
def test_mariadb_definer_view_calling_a_package_function_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # red team rt24 F4: `db`.`pkg`.`f`( was read as `pkg`.`f`: a package named as its database made
    # it the benign stand-alone `db`.`f`, and the view answered the e-mails while doctor said ok
    db, d, masks = maria, maria.db, _masks(tmp_path, "customers.email")
    with db.admin.cursor() as c:
        for sql in (
            f"CREATE DEFINER = '{db.reader}'@'%' FUNCTION {d}.f(x int) RETURNS varchar(80) DETERMINISTIC"
            " SQL SECURITY INVOKER RETURN concat('benign ', x)",
            "SET SESSION sql_mode = ORACLE",
            f"CREATE PACKAGE {d}.{d} SQL SECURITY INVOKER AS FUNCTION f(x int) RETURN varchar(80); END",
            f"CREATE PACKAGE BODY {d}.{d} SQL SECURITY INVOKER AS FUNCTION f(x int) RETURN varchar(80) AS"
            f" r varchar(80); BEGIN SELECT email INTO r FROM {d}.customers WHERE id = x; RETURN r; END; END",
            f"CREATE VIEW {d}.v_pkg AS SELECT id, {d}.{d}.f(id) AS e FROM {d}.customers",
            f"GRANT EXECUTE ON PACKAGE {d}.{d} TO '{db.reader}'@'%'",
            "SET SESSION sql_mode = DEFAULT",
            f"GRANT SELECT, SHOW VIEW ON {d}.v_pkg TO '{db.reader}'@'%'",
        ):
            c.execute(sql)
    code, out = _run(
        capsys, "sql", "grant", "--dsn", db.admin_url, "--role", "mk_vcalls_g",
        "--tables", f"{d}.customers,{d}.v_pkg", "--mask", masks,
    )  # fmt: skip
    assert code == 0 and f"GRANT SELECT ON `{d}`.`v_pkg`" not in out, out
    # a package body is stored under sql_mode ORACLE, read otherwise than the check (rt30 F4): unread
    assert f"-- left out: view {d}.v_pkg runs as its definer root@" in out, out  # rtJ L1: refused as such
    allow = ["--allow", f"view:{d}.v_pkg", "--allow", f"routine:{d}.f", "--allow", f"routine:{d}.{d}"]
    base = ["--dsn", db.reader_url, "--mask", masks, *_allow(db), *allow]
    code, out = _run(capsys, "sql", "query", *base, "SELECT id, e FROM v_pkg ORDER BY id")
    assert code == 2 and SECRET not in out, out  # before: | 1 | ann@secret.example |
    assert f"view `{d}`.`v_pkg`: it calls function {d}, which has a body stored under sql_mode" in out, out
    code, out = _run(capsys, "sql", "doctor", "--dsn", db.reader_url, "--mask", masks, *_allow(db))
    assert f"can run package {d}.{d} (SQL SECURITY INVOKER)" in out, out  # its opt-in: routine:D.PKG
