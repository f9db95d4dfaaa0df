"""Masks resolve every table where the database does: in its own schema, through the search_path,
in another MariaDB database (red team mask13 F1, F1b, F2, F6).

Masking read the default schema alone, so a qualified `crm.customers` was analysed with the
columns of `public.customers` (an alias column list then named the e-mail), a mask on a table in
another schema was never checked against the database's grants, and an unqualified name was
resolved in the default schema although the search_path put another schema first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlglot import exp

from mcpkit.cli import main
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.masking.schema import reflect
from tests.sql.sql_support import MysqlScratch, PgScratch, mysql_scratch, pg_scratch

SECRET = "@secret.example"


def _ask(capsys: pytest.CaptureFixture[str], url: str, masks: Path, sql: str) -> tuple[int, str]:
    """`mcpkit sql query --mask`: what the agent would read, and the exit status."""
    code = main(["sql", "query", "--dsn", url, "--mask", str(masks), sql])
    out = capsys.readouterr()
    return code, out.out + out.err


def _masks(tmp_path: Path, *rules: str) -> Path:
    path = tmp_path / "masks.yaml"
    path.write_text("masks:\n" + "".join(f"  - {r}\n" for r in rules), encoding="utf-8")
    return path


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    """crm.customers and crm.accounts hold e-mails; public has tables of the same names without."""
    with pg_scratch(pg_url, "mschema") as db:
        db.admin.execute(
            f"""
            CREATE SCHEMA crm;
            CREATE TABLE crm.customers (id int PRIMARY KEY, name text, email text);
            INSERT INTO crm.customers VALUES (1, 'Ann', 'ann{SECRET}'), (2, 'Bob', 'bob{SECRET}');
            CREATE TABLE public.customers (id int, region text);
            INSERT INTO public.customers VALUES (1, 'emea');
            CREATE TABLE crm.accounts (id int, email text);
            INSERT INTO crm.accounts VALUES (1, 'acct{SECRET}');
            CREATE TABLE public.accounts (id int, label text);
            CREATE TABLE crm.leads (id int, email text);
            INSERT INTO crm.leads VALUES (1, 'lead{SECRET}');
            CREATE SCHEMA aaa;  -- empty, listed first: the reflection keeps its shape
            CREATE TABLE crm.aaa_zero ();
            CREATE SCHEMA hidden;  -- no USAGE: not reflected (the database refuses it by name)
            CREATE TABLE hidden.customers (email text);
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            GRANT USAGE ON SCHEMA aaa, crm, public TO {db.reader};
            GRANT SELECT ON ALL TABLES IN SCHEMA crm, public TO {db.reader};
            """
        )
        yield db


MASKS = ("crm.customers.email", "crm.accounts.email", "crm.leads.email")


@pytest.mark.postgres
def test_postgres_a_mask_in_another_schema_is_checked_against_the_grants(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The reader may select crm's e-mails: start-up refuses, naming each table in its schema.
    code, out = _ask(
        capsys, pg.reader_url, _masks(tmp_path, *MASKS), "SELECT x FROM crm.customers AS c(a, b, x)"
    )
    assert code == 2, out
    assert SECRET not in out
    for table in ("crm.customers", "crm.accounts", "crm.leads"):
        assert f"can read masked column(s) email of {table}:" in out, out


def _withhold(db: PgScratch) -> None:
    for table, others in (("customers", "id, name"), ("accounts", "id"), ("leads", "id")):
        db.admin.execute(f"REVOKE SELECT ON crm.{table} FROM {db.reader}")
        db.admin.execute(f"GRANT SELECT ({others}) ON crm.{table} TO {db.reader}")


@pytest.mark.postgres
@pytest.mark.parametrize("path", ["crm, public", "public, crm"])
def test_postgres_tables_resolve_through_the_search_path(
    pg: PgScratch, path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _withhold(pg)
    pg.admin.execute(f"ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = {path}")
    masks = _masks(tmp_path, *MASKS)
    crm_first = path.startswith("crm")
    answered = {
        "SELECT x FROM crm.customers AS c(a, b, x)": "| <masked> |",
        "SELECT * FROM crm.accounts": "| 1 | <masked> |",
        "SELECT l.* FROM leads AS l(a, b)": "| 1 | <masked> |",  # only in crm: found down the path
        "SELECT * FROM customers": "| 2 | Bob | <masked> |" if crm_first else "| 1 | emea |",
        "SELECT * FROM public.customers": "| 1 | emea |",
    }
    for sql, last in answered.items():
        code, out = _ask(capsys, pg.reader_url, masks, sql)
        assert code == 0 and SECRET not in out, (sql, out)
        assert out.rstrip().splitlines()[-1] == last, (sql, out)
    refused = [
        "SELECT count(*) FROM leads WHERE email LIKE 'lead%'",
        "SELECT id FROM customers ORDER BY email",
    ]
    if not crm_first:  # public.customers has no e-mail: the database names it, never a value
        refused = refused[:1]
    for sql in refused:
        code, out = _ask(capsys, pg.reader_url, masks, sql)
        assert code == 3 and SECRET not in out, (sql, out)


@pytest.mark.postgres
def test_postgres_calls_keep_the_search_path_the_masks_were_resolved_through(
    pg: PgScratch, tmp_path: Path
) -> None:
    # A path changed after start-up (ALTER ROLE, a pooled session) cannot move a name to another
    # table behind the analysis: each call sets the path masking resolved through.
    from mcpkit.sql.engines.engine import SqlEngine
    from mcpkit.sql.maskcheck import prepare_masks

    _withhold(pg)
    pg.admin.execute(f"ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = crm, public")
    engine = SqlEngine(pg.reader_url)
    try:
        _, reflection, _ = prepare_masks(engine, str(_masks(tmp_path, *MASKS)))
        assert reflection.path == ("crm", "public")
        engine.profile.pin_name_path(reflection.path)
        pg.admin.execute(f"ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = public")
        other = engine.for_login(pg.reader, "pw")  # a fresh login: the new default path
        try:
            for each in (engine, other):
                rows = each.execute("SELECT current_schemas(false)::text", {}, 1, 5.0, "path").rows
                assert rows[0][0] == "{crm,public}"
        finally:
            other.close()
    finally:
        engine.close()


@pytest.fixture
def my(mysql_url: str) -> Iterator[tuple[MysqlScratch, str]]:
    """`customers` with e-mails withheld by column grants, and a readable twin in another database."""
    with mysql_scratch(mysql_url, "mschema") as db:
        twin = f"{db.db}_twin"
        with db.admin.cursor() as c:
            c.execute(f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, name text, email varchar(80))")
            c.execute(
                f"INSERT INTO {db.db}.customers VALUES (1, 'Ann', 'ann{SECRET}'), (2, 'Bob', 'bob{SECRET}')"
            )
            c.execute(f"CREATE DATABASE {twin}")
            c.execute(f"CREATE TABLE {twin}.customers (id int, email varchar(80))")
            c.execute(f"INSERT INTO {twin}.customers VALUES (7, 'ann{SECRET}'), (8, 'zed@guess.example')")
            c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
            c.execute(f"GRANT SELECT ON {twin}.* TO '{db.reader}'@'%'")
        try:
            yield db, twin
        finally:
            with db.admin.cursor() as c:
                c.execute(f"DROP DATABASE IF EXISTS {twin}")


@pytest.mark.mysql
def test_mariadb_a_twin_in_another_database_is_no_membership_oracle(
    my: tuple[MysqlScratch, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # MariaDB does not check column privileges on USING columns: the join itself would tell which
    # twin e-mails the masked column holds (row 7 comes back, row 8 does not). Masking refuses it.
    db, twin = my
    masks = _masks(tmp_path, f"{db.db}.customers.email")
    for sql in (
        f"SELECT t.id FROM customers JOIN {twin}.customers t USING (email)",
        f"SELECT t.id FROM {twin}.customers t JOIN customers USING (email)",
        f"SELECT t.id FROM {twin}.customers t NATURAL JOIN customers",
        f"SELECT t.id FROM {twin}.customers t JOIN {db.db}.customers c ON c.email = t.email",
    ):
        code, out = _ask(capsys, db.reader_url, masks, sql)
        assert code == 3 and "| 7 |" not in out, (sql, out)
    code, out = _ask(capsys, db.reader_url, masks, f"SELECT * FROM {twin}.customers ORDER BY id")
    assert code == 0 and out.rstrip().splitlines()[-1] == "| 8 | zed@guess.example |", out  # not masked
    code, out = _ask(capsys, db.reader_url, masks, "SELECT * FROM customers ORDER BY id")
    assert code == 0 and SECRET not in out and out.rstrip().splitlines()[-1] == "| 2 | Bob | <masked> |", out


@pytest.mark.mysql
def test_mariadb_a_masked_table_in_another_database_is_checked_and_resolved(
    my: tuple[MysqlScratch, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Connected to the twin's database: the masked table is the qualified one, the twin is
    # `customers`. Start-up checks the grants of the other database's table, in its database.
    db, twin = my
    url = make_url(db.reader_url).set(database=twin).render_as_string(hide_password=False)
    masks = _masks(tmp_path, f"{db.db}.customers.email")
    with db.admin.cursor() as c:
        c.execute(f"GRANT SELECT (email) ON {db.db}.customers TO '{db.reader}'@'%'")
    code, out = _ask(capsys, url, masks, f"SELECT * FROM {db.db}.customers")
    assert code == 2 and SECRET not in out, out
    assert f"can read masked column(s) email of `{db.db}`.`customers`" in out, out
    with db.admin.cursor() as c:
        c.execute(f"REVOKE SELECT (email) ON {db.db}.customers FROM '{db.reader}'@'%'")
    code, out = _ask(capsys, url, masks, f"SELECT * FROM {db.db}.customers ORDER BY id")
    assert code == 0 and out.rstrip().splitlines()[-1] == "| 2 | Bob | <masked> |", out
    code, out = _ask(capsys, url, masks, f"SELECT t.id FROM customers t JOIN {db.db}.customers USING (email)")
    assert code == 3 and "| 7 |" not in out, out
    code, out = _ask(capsys, url, masks, "SELECT * FROM customers ORDER BY id")  # the twin: not masked
    assert code == 0 and out.rstrip().splitlines()[-1] == "| 8 | zed@guess.example |", out


@pytest.mark.postgres
def test_postgres_a_foreign_key_copy_in_another_schema_is_masked_and_withheld(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Red team pg13 F4: `sales.orders.customer_email REFERENCES crm.customers(email)` holds the
    # e-mails; read through a security_invoker view it handed them out while start-up said ok.
    _withhold(pg)
    pg.admin.execute(
        f"""
        ALTER TABLE crm.customers ADD UNIQUE (email);
        CREATE SCHEMA sales;
        CREATE TABLE sales.orders (id int, customer_email text REFERENCES crm.customers (email));
        INSERT INTO sales.orders VALUES (10, 'ann{SECRET}');
        CREATE VIEW sales.order_mail WITH (security_invoker) AS SELECT id, customer_email FROM sales.orders;
        GRANT USAGE ON SCHEMA sales TO {pg.reader};
        GRANT SELECT ON sales.orders, sales.order_mail TO {pg.reader};
        """
    )
    masks = _masks(tmp_path, *MASKS)
    code, out = _ask(capsys, pg.reader_url, masks, "SELECT * FROM sales.order_mail")
    assert code == 2 and SECRET not in out, out
    assert "can read masked column(s) customer_email of sales.orders:" in out, out
    pg.admin.execute(f"REVOKE SELECT ON sales.orders FROM {pg.reader}")
    pg.admin.execute(f"GRANT SELECT (id) ON sales.orders TO {pg.reader}")
    code, out = _ask(capsys, pg.reader_url, masks, "SELECT * FROM sales.order_mail")
    assert code == 4 and SECRET not in out, out  # the database refuses the view its column
    for sql in ("SELECT * FROM sales.orders", "SELECT id, customer_email FROM sales.orders"):
        code, out = _ask(capsys, pg.reader_url, masks, sql)
        assert code == 0 and out.rstrip().splitlines()[-1] == "| 10 | <masked> |", (sql, out)


@pytest.mark.mysql
def test_mariadb_definer_routes_in_another_database_are_checked(
    my: tuple[MysqlScratch, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Red team mask13 F4, F7: a DEFINER view and a DEFINER function in the twin database, opted in
    # with --allow, read the masked e-mails with their definer's rights; start-up looked for such
    # routes in the connection's database alone (and for views only), and the e-mails came back.
    db, twin = my
    with db.admin.cursor() as c:
        c.execute(
            f"CREATE DEFINER=CURRENT_USER SQL SECURITY DEFINER VIEW {twin}.mails AS"
            f" SELECT id, email FROM {db.db}.customers"
        )
        c.execute(
            f"CREATE DEFINER=CURRENT_USER FUNCTION {twin}.mail_of(i int) RETURNS varchar(80)"
            f" SQL SECURITY DEFINER READS SQL DATA RETURN (SELECT email FROM {db.db}.customers WHERE id = i)"
        )
        c.execute(f"GRANT EXECUTE ON FUNCTION {twin}.mail_of TO '{db.reader}'@'%'")
    masks = _masks(tmp_path, f"{db.db}.customers.email")
    allow = [
        *("--allow", f"view:{twin}.mails", "--allow", f"routine:{twin}.mail_of"),
        *("--allow-function", f"{twin}.mail_of"),
    ]
    for sql in (f"SELECT * FROM {twin}.mails", f"SELECT {twin}.mail_of(1)"):
        code = main(["sql", "query", "--dsn", db.reader_url, "--mask", str(masks), *allow, sql])
        out = capsys.readouterr()
        text = out.out + out.err
        assert code == 2 and SECRET not in text, (sql, text)
        assert f"view `{twin}`.`mails`:" in text, text
        assert f"function `{twin}`.`mail_of` runs as its definer" in text, text
    with db.admin.cursor() as c:  # readable, the view's definition names the masked column
        c.execute(f"GRANT SHOW VIEW ON {twin}.mails TO '{db.reader}'@'%'")
    code = main(["sql", "query", "--dsn", db.reader_url, "--mask", str(masks), *allow, "SELECT 1"])
    text = "".join(capsys.readouterr())
    assert code == 2 and f"view `{twin}`.`mails`: it reads a masked column" in text, text


@pytest.mark.mysql
def test_mariadb_without_a_default_database_resolves_qualified_names_only(
    my: tuple[MysqlScratch, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A URL without a database: masking reflected "the default database" (none) and start-up
    # failed with a traceback; every database is reflected now, and a bare name is refused.
    db, twin = my
    url = make_url(db.reader_url).set(database="").render_as_string(hide_password=False)
    masks = _masks(tmp_path, f"{db.db}.customers.email")
    code, out = _ask(capsys, url, masks, f"SELECT * FROM {db.db}.customers ORDER BY id")
    assert code == 0 and out.rstrip().splitlines()[-1] == "| 2 | Bob | <masked> |", out
    code, out = _ask(
        capsys, url, masks, f"SELECT t.id FROM {twin}.customers t JOIN {db.db}.customers USING (email)"
    )
    assert code == 3 and "| 7 |" not in out, out
    code, out = _ask(capsys, url, masks, "SELECT * FROM customers")
    assert code == 3 and SECRET not in out and "cannot resolve" in out, out


@pytest.mark.postgres
@pytest.mark.parametrize("path", ["''", "nowhere", "hidden", "nowhere, hidden"])
def test_postgres_a_search_path_reaching_no_usable_schema_resolves_qualified_names_only(
    pg: PgScratch, path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An empty search_path, or one naming only a missing schema or one without USAGE: masking fell
    # back to one namespace and refused every query; qualified names resolve in their schema now,
    # a bare one (which the database resolves nowhere) is refused. The grants are still checked.
    pg.admin.execute(f"ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = {path}")
    masks = _masks(tmp_path, *MASKS)
    code, out = _ask(capsys, pg.reader_url, masks, "SELECT 1")
    assert code == 2 and "can read masked column(s) email of crm.customers:" in out, out
    _withhold(pg)
    for sql, last in (
        ("SELECT x FROM crm.customers AS c(a, b, x) ORDER BY a", "| <masked> |"),
        ("SELECT * FROM public.customers", "| 1 | emea |"),
    ):
        code, out = _ask(capsys, pg.reader_url, masks, sql)
        assert code == 0 and out.rstrip().splitlines()[-1] == last, (sql, out)
    code, out = _ask(capsys, pg.reader_url, masks, "SELECT * FROM customers")
    assert code == 3 and SECRET not in out and "cannot resolve" in out, out


@pytest.mark.mysql
def test_mariadb_a_database_dropped_while_reflection_walks_them_is_skipped(
    my: tuple[MysqlScratch, str],
) -> None:
    # Seen in a parallel test run: `grant --mask` listed the databases, another session dropped one,
    # and reflecting it raised error 1049 out of start-up. An operator's DDL can land there as well.
    db, twin = my
    # before: OperationalError (1049, "Unknown database ...")
    mapping = _reflect_dropping(db, "show schemas", 1, f"DROP DATABASE IF EXISTS {twin}")
    assert twin not in mapping and "customers" in mapping[db.db]


def _reflect_dropping(db: MysqlScratch, listing: str, nth: int, ddl: str) -> dict[str, Any]:
    """`reflect` as the admin, running `ddl` right after the `nth` statement starting with `listing`
    (another session's DDL landing between the listing and the reading)."""
    engine = SqlEngine(db.admin_url)
    seen: list[str] = []

    def drop_after_listing(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.strip().lower().startswith(listing):
            seen.append(statement)
            if len(seen) == nth:
                with db.admin.cursor() as c:
                    c.execute(ddl)

    event.listen(engine.sa_engine, "after_cursor_execute", drop_after_listing)
    try:
        return reflect(engine).mapping
    finally:
        engine.close()


@pytest.mark.mysql
def test_mariadb_a_table_dropped_while_reflection_reads_it_is_skipped(
    my: tuple[MysqlScratch, str],
) -> None:
    # Seen in a parallel CI run: `grant --mask` listed a database's tables, another session dropped
    # one of them (with its database), and reading its columns raised NoSuchTableError out of start-up.
    db, twin = my
    # the twin's views are listed, then its tables; before: NoSuchTableError `..._twin`.`customers`
    listing = f"show full tables from `{twin}`"
    mapping = _reflect_dropping(db, listing, 2, f"DROP TABLE IF EXISTS {twin}.customers")
    assert twin not in mapping and "customers" in mapping[db.db]


@pytest.mark.mysql
def test_mariadb_a_database_dropped_between_reflection_and_its_views_is_skipped(
    my: tuple[MysqlScratch, str],
) -> None:
    # Seen in a parallel CI run: `grant --mask` reflected every database, another session dropped
    # one, and listing its views for the analysis raised error 1049 out of the command.
    db, twin = my
    engine = SqlEngine(db.admin_url)
    try:
        reflection = reflect(engine)
        with db.admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {twin}")
        known = reflection.known(engine)  # before: OperationalError (1049, "Unknown database ...")
    finally:
        engine.close()
    assert known.columns(exp.to_table(f"{db.db}.customers")) is not None
