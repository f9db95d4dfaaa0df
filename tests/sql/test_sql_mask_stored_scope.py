"""Stored SQL the order check did not see, or read in the wrong database (red team rt27 F7, F10).

F7 (PostgreSQL): a row-level-security policy `USING (id IN (SELECT c.id FROM customers c LIMIT 2))`
on `tickets` made `SELECT id FROM tickets` answer the tickets of the two smallest e-mails (the
masked table CLUSTERed on its e-mail index), with no finding: policies were not among the stored
queries. Now each policy over a masked table that applies to the reader is checked like a view
(opt-in `policy-order:S.TABLE.POLICY`).

F10 (MariaDB): a routine runs with its own database as default, so `customers` in a function of
`db2` was `db2.customers` (a view whose `id` is a constant) while the check read the connection's
`customers` (primary key id): `ORDER BY id LIMIT 1` looked total, and `SELECT db2.firstid()`
answered the id of the smallest e-mail. Now a routine's unqualified names resolve in its database.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import text_of
from tests.sql.sql_support import (
    MysqlScratch,
    PgScratch,
    masks_file,
    mysql_scratch,
    pg_scratch,
    serving_masked,
)
from tests.sql.sql_support import run_cli as _run

SECRET = "@secret.example"
# Ids out of e-mail order: the e-mail ranking lists the ids 4, 1, 5, 2, 3.
ROWS = [(1, "Ann", "b"), (2, "Bob", "d"), (3, "Cy", "e"), (4, "Dan", "a"), (5, "Eve", "c")]


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt27e_scope") as db:
        rows = ", ".join(f"({i}, '{e}{SECRET}', '{n}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, email text, name text);
            INSERT INTO customers VALUES {rows};
            CREATE INDEX customers_email ON customers (email);
            CLUSTER customers USING customers_email;
            ANALYZE customers;
            CREATE TABLE tickets (id int PRIMARY KEY, title text);
            INSERT INTO tickets SELECT g, 't' || g FROM generate_series(1, 5) g;
            ALTER TABLE tickets ENABLE ROW LEVEL SECURITY;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            GRANT SELECT ON tickets TO {db.reader};
            """
        )
        yield db


def _pg_query(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    masks = masks_file(tmp_path, "customers.email")
    return _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *args)


@pytest.mark.postgres
def test_postgres_an_order_dependent_row_security_policy_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        "CREATE POLICY first_customers ON tickets FOR SELECT"
        " USING (id IN (SELECT c.id FROM customers c LIMIT 2))"
    )
    # what the red team read as the reader: the tickets of the two smallest e-mails (ids 4, 1)
    pg.admin.execute(f"SET ROLE {pg.reader}")
    seen = sorted(r[0] for r in pg.admin.execute("SELECT id FROM tickets").fetchall())
    pg.admin.execute("RESET ROLE")
    assert seen == [1, 4]
    code, out = _pg_query(pg, tmp_path, capsys, "SELECT id FROM tickets ORDER BY id")
    assert code == 2, out  # before: | 1 | 4 |
    assert (
        "policy public.tickets.first_customers may answer in the scan order of a masked table: LIMIT" in out
    )
    assert "--allow policy-order:public.tickets.first_customers" in out, out
    assert "DROP POLICY first_customers ON public.tickets" in out
    allow = ["--allow", "policy-order:public.tickets.first_customers"]
    code, out = _pg_query(pg, tmp_path, capsys, *allow, "SELECT count(*) AS n FROM tickets")
    assert code == 0, out  # the operator's opt-in accepts it (a warning)


@pytest.mark.postgres
def test_postgres_a_policy_through_a_function_or_in_with_check_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"""
        CREATE FUNCTION few() RETURNS SETOF int STABLE LANGUAGE sql AS 'SELECT id FROM customers LIMIT 2';
        CREATE POLICY via_function ON tickets USING (id IN (SELECT few()));
        CREATE POLICY on_write ON tickets FOR INSERT TO {pg.reader}
            WITH CHECK (id IN (SELECT string_agg(c.id::text, '')::int FROM customers c));
        """
    )
    code, out = _pg_query(pg, tmp_path, capsys, "--allow", "function:public.few", "SELECT 1 AS a")
    assert code == 2, out
    assert "--allow policy-order:public.tickets.via_function" in out, out
    assert "policy public.tickets.via_function may answer" in out and "it reads function public.few" in out
    assert "policy public.tickets.on_write may answer in the scan order of a masked table: aggregate" in out


@pytest.mark.postgres
def test_postgres_policies_ordered_by_the_key_or_for_other_roles_pass(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = f"{pg.reader}_o"
    pg.admin.execute(
        f"""
        CREATE ROLE {other} NOLOGIN;
        CREATE POLICY by_key ON tickets FOR SELECT
            USING (id IN (SELECT c.id FROM customers c ORDER BY c.id LIMIT 2));
        CREATE POLICY others ON tickets FOR SELECT TO {other}
            USING (id IN (SELECT c.id FROM customers c LIMIT 2));
        CREATE POLICY plain ON customers FOR SELECT USING (name <> '');
        """
    )
    try:
        code, out = _pg_query(pg, tmp_path, capsys, "SELECT id FROM tickets ORDER BY id")
        assert code == 0, out
        assert "| 1 |" in out and "| 2 |" in out and "| 3 |" not in out
        # a role the reader is not a member of, that owns no view or definer function: not the reader's
        pg.admin.execute(f"CREATE VIEW v_other AS SELECT 1 AS a; ALTER VIEW v_other OWNER TO {other}")
        code, out = _pg_query(pg, tmp_path, capsys, "SELECT id FROM tickets ORDER BY id")
        assert code == 2, out  # its owner's policies apply to whoever reads the view: fails closed
        assert "--allow policy-order:public.tickets.others" in out, out
        assert "tickets.by_key" not in out and "customers.plain" not in out
    finally:
        pg.admin.execute(f"DROP VIEW IF EXISTS v_other; DROP POLICY others ON tickets; DROP ROLE {other}")


@pytest.mark.postgres
def test_postgres_grant_leaves_a_table_under_such_a_policy_out(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        """
        CREATE TABLE notes (id int PRIMARY KEY, body text);
        ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
        CREATE POLICY first_customers ON tickets USING (id IN (SELECT c.id FROM customers c LIMIT 2));
        CREATE POLICY by_key ON notes USING (id IN (SELECT c.id FROM customers c ORDER BY c.id LIMIT 2));
        """
    )
    reader = f"{pg.reader}_g"
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(
        capsys, "sql", "grant", "--dsn", pg.admin_url, "--role", reader,
        "--tables", "public.customers,public.tickets,public.notes", "--mask", masks,
    )  # fmt: skip
    assert code == 0, out
    assert "ON public.tickets TO" not in out, out
    assert "-- left out: table public.tickets may answer in the scan order of a masked table: policy" in out
    assert "GRANT SELECT ON public.notes TO" in out, out


@pytest.mark.postgres
@pytest.mark.anyio
async def test_postgres_a_policy_created_while_serving_is_checked_again(
    pg: PgScratch, tmp_path: Path
) -> None:
    # pg_policy is in the catalog fingerprint: the re-verification runs this check too
    async with serving_masked(pg.reader_url, masks_file(tmp_path, "customers.email")) as ask:
        first = await ask("SELECT count(*) AS n FROM tickets")
        assert "mcpkit/error" not in (first.meta or {}), text_of(first)  # RLS on, no policy: 0 rows
        pg.admin.execute(
            "CREATE POLICY first_customers ON tickets FOR SELECT"
            " USING (id IN (SELECT c.id FROM customers c LIMIT 2))"
        )
        leaked = await ask("SELECT id FROM tickets ORDER BY id")
        code = (leaked.meta or {}).get("mcpkit/error", {}).get("code")
        assert code == "SOURCE_UNVERIFIED", text_of(leaked)


@pytest.mark.postgres
def test_postgres_a_view_created_under_another_search_path_is_read_as_stored(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the PG analogue of F10 for views: the view text names what it read, qualified where the
    # reader's search_path would resolve the name elsewhere (pg_get_viewdef), so nothing moves
    pg.admin.execute(
        f"""
        CREATE SCHEMA rt27e_x;
        CREATE VIEW rt27e_x.customers WITH (security_invoker = true) AS SELECT id AS real, 1 AS id
            FROM public.customers;
        SET search_path = rt27e_x;
        CREATE VIEW public.v_moved WITH (security_invoker = true) AS
            SELECT real FROM customers ORDER BY id LIMIT 1;
        RESET search_path;
        GRANT USAGE ON SCHEMA rt27e_x TO {pg.reader};
        GRANT SELECT ON rt27e_x.customers, public.v_moved TO {pg.reader};
        """
    )
    code, out = _pg_query(pg, tmp_path, capsys, "SELECT real FROM v_moved")
    assert code == 2, out
    assert "view public.v_moved may answer in the scan order of a masked table: LIMIT" in out, out


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt27e_scope") as db:
        other = f"{db.db}_2"
        rows = ", ".join(f"({i}, '{e}{SECRET}', '{n}')" for i, n, e in ROWS)
        try:
            with db.admin.cursor() as c:
                c.execute(
                    f"CREATE TABLE {db.db}.customers (id int PRIMARY KEY, email varchar(80), name text)"
                )
                c.execute(f"CREATE INDEX by_email ON {db.db}.customers (email, id)")
                c.execute(f"INSERT INTO {db.db}.customers VALUES {rows}")
                c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
                c.execute(f"CREATE DATABASE {other}")
            yield db
        finally:
            with db.admin.cursor() as c:
                c.execute(f"DROP DATABASE IF EXISTS {other}")


@pytest.mark.mysql
def test_mariadb_a_routine_reads_its_own_database_s_names(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, d2, who = my.db, f"{my.db}_2", f"'{my.reader}'@'%'"
    with my.admin.cursor() as c:
        c.execute(
            f"CREATE DEFINER={who} SQL SECURITY INVOKER VIEW {d2}.customers AS"
            f" SELECT id AS `real`, 1 AS id FROM {d}.customers"
        )
        c.execute(f"GRANT SELECT, SHOW VIEW ON {d2}.customers TO {who}")
        for db, name, body in (
            (d2, "firstid", "SELECT `real` FROM customers ORDER BY id LIMIT 1"),
            (d, "firstname", "SELECT name FROM customers ORDER BY id LIMIT 1"),  # its own table: total
        ):
            c.execute(
                f"CREATE DEFINER={who} FUNCTION {db}.{name}() RETURNS text READS SQL DATA"
                f" SQL SECURITY INVOKER RETURN ({body})"
            )
            c.execute(f"GRANT EXECUTE ON FUNCTION {db}.{name} TO {who}")
        c.execute(f"SELECT {d2}.firstid()")
        first = str(c.fetchone()[0])
    assert first in ("3", "4")  # the first id in the e-mail index's order (either direction)
    masks = masks_file(tmp_path, "customers.email")
    allow = [
        a
        for f in (f"{d2}.firstid", f"{d}.firstname")
        for a in ("--allow-function", f, "--allow", f"routine:{f}")
    ]
    code, out = _run(
        capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, *allow, f"SELECT {d2}.firstid() AS a"
    )
    assert code == 2, out  # before: | 4 |
    assert f"function {d2}.firstid may answer in the scan order of a masked table: LIMIT" in out, out
    assert f"--allow function-order:{d2}.firstid" in out
    assert f"{d}.firstname " not in out, out
    code, out = _run(
        capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, *allow,
        "--allow", f"function-order:{d2}.firstid", f"SELECT {d}.firstname() AS a",
    )  # fmt: skip
    assert code == 0, out
    assert "| Ann |" in out


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT `real` FROM customers ORDER BY id LIMIT 1",
            "SELECT `real` FROM `db2`.customers ORDER BY id LIMIT 1",
        ),
        ("SELECT a FROM `d`.`t`", "SELECT a FROM `d`.`t`"),  # qualified: as stored
        ("WITH customers AS (SELECT 1 AS id) SELECT id FROM customers", None),  # a CTE: not qualified
        ("BEGIN RETURN 1; END", None),  # does not parse as one query: as it was, and counted
    ],
)
def test_unqualified_names_resolve_in_the_routine_s_database(sql: str, expected: str | None) -> None:
    from mcpkit.sql.profiles.mysql.stored import _in_database

    assert _in_database(sql, "db2") == (expected or sql)
