"""Tables renamed or columns added while serving are checked against start-up's reflection (rt33c F1, F2).

F1: with `--mask customers.email`, the operator swapped the names of `customers` and `plain` in one
transaction while serving; the re-verification re-checked privileges and passed, but calls were
still analysed against the start-up reflection, in which `plain` has no masked column:
`SELECT array_agg(id) FROM plain` answered the ids in e-mail order (PostgreSQL: privileges follow
the table). On MariaDB privileges stay with the names, so the table holding the e-mails became
readable whole under the name `plain`.
F2: with a `*.ssn` rule, `ALTER TABLE plain ADD COLUMN ssn` (or `RENAME COLUMN name TO ssn`) on a
table granted whole answered the new column in clear: the glob rules were expanded once at start-up.
Now a moved fingerprint also compares the relations (identity, columns) and the mask expansion with
start-up's (`mcpkit.sql.relcheck`): a difference refuses the database until a restart. A column
no rule matches, added to an unmasked table, still passes.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import READER_CONNECTIONS, MysqlScratch, PgScratch, mysql_scratch, pg_scratch

# In e-mail order the ids are 2, 4, 5, 3, 6, 1.
_ROWS = "(1,'n','zed@x.io',1),(2,'n','alice@x.io',1),(3,'n','mike@x.io',1),(4,'n','bob@x.io',1),"
_ROWS += "(5,'n','carol@x.io',1),(6,'n','yan@x.io',1)"
_PLAIN = "(1,'p',1),(2,'p',1),(3,'p',1),(4,'p',1),(5,'p',1),(6,'p',1)"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt33refl") as db:
        db.admin.execute(
            f"""
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text, tier int);
            INSERT INTO customers VALUES {_ROWS};
            CREATE UNIQUE INDEX customers_email_idx ON customers (email);
            CLUSTER customers USING customers_email_idx;
            CREATE TABLE plain (id int PRIMARY KEY, name text, tier int);
            INSERT INTO plain VALUES {_PLAIN};
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name, tier) ON customers TO {db.reader};
            GRANT SELECT ON plain TO {db.reader};
            """
        )
        yield db


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt33refl") as db:
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.customers (id INT PRIMARY KEY, name VARCHAR(20), email VARCHAR(80),"
                " tier INT, UNIQUE KEY ek (email)) ENGINE=InnoDB"
            )
            c.execute(f"INSERT INTO {db.db}.customers VALUES {_ROWS}")
            c.execute(f"CREATE TABLE {db.db}.plain (id INT PRIMARY KEY, name VARCHAR(20), tier INT)")
            c.execute(f"INSERT INTO {db.db}.plain VALUES {_PLAIN}")
            c.execute(f"GRANT SELECT (id, name, tier) ON {db.db}.customers TO '{db.reader}'@'%'")
            c.execute(f"GRANT SELECT ON {db.db}.plain TO '{db.reader}'@'%'")
        yield db


def _service(tmp_path: Path, dsn: str) -> SqlService:
    masks = tmp_path / "masks.yaml"
    masks.write_text('masks:\n  - customers.email\n  - "*.ssn"\n')
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "sql",
            "query",
            "--dsn",
            dsn,
            "--mask",
            str(masks),
            "--allow",
            "unbounded-memory",
            "--allow",
            "clustered-order:customers",  # `pg_customers` CLUSTERs on the masked e-mail index
            "--allow",
            "clustered-order:public.customers",  # its name once a second schema has a customers
            "--timeout",
            "30",
            "SELECT 1",
        ]
    )
    args.allow, args.allow_function = sqlcli.opt_ins(args)
    return sqlcli._service(args, 1000)


def _ask(service: SqlService, sql: str) -> str:
    try:
        return service.query(sql, call_id="rt33refl", max_rows=100)[1]
    except ToolError as exc:
        return str(exc.code)


def _my_run(db: MysqlScratch, *statements: str) -> None:
    with db.admin.cursor() as c:
        for statement in statements:
            c.execute(statement.replace("{db}", db.db))


_PG_CHANGES = {
    "swap": "BEGIN; ALTER TABLE customers RENAME TO tmp_swap; ALTER TABLE plain RENAME TO customers;"
    " ALTER TABLE tmp_swap RENAME TO plain; COMMIT;",
    "add": "ALTER TABLE plain ADD COLUMN ssn text; UPDATE plain SET ssn = 'ssn-' || id;",
    "rename": "UPDATE plain SET name = 'ssn-' || id; ALTER TABLE plain RENAME COLUMN name TO ssn;",
}
_MY_CHANGES = {
    "swap": (
        "RENAME TABLE {db}.customers TO {db}.tmp_swap, {db}.plain TO {db}.customers,"
        " {db}.tmp_swap TO {db}.plain",
    ),
    "add": (
        "ALTER TABLE {db}.plain ADD COLUMN ssn VARCHAR(20)",
        "UPDATE {db}.plain SET ssn = CONCAT('ssn-', id)",
    ),
    "rename": (
        "UPDATE {db}.plain SET name = CONCAT('ssn-', id)",
        "ALTER TABLE {db}.plain RENAME COLUMN name TO ssn",
    ),
}
_ASKED = {
    "swap": ("SELECT id FROM plain LIMIT 2", "SELECT * FROM plain"),
    "add": ("SELECT ssn FROM plain", "SELECT id FROM plain WHERE ssn = 'ssn-3'"),
    "rename": ("SELECT ssn FROM plain", "SELECT id FROM plain WHERE ssn = 'ssn-3'"),
}


def _refused_after(service: SqlService, change: str) -> None:
    for sql in _ASKED[change]:
        answer = _ask(service, sql)
        assert answer == "SOURCE_UNVERIFIED", (change, sql, answer)
    assert _ask(service, "SELECT id FROM customers") == "SOURCE_UNVERIFIED"  # the whole database


@pytest.mark.parametrize("change", sorted(_PG_CHANGES))
def test_postgres_a_rename_or_new_masked_column_while_serving_refuses_until_restart(
    pg: PgScratch, tmp_path: Path, change: str
) -> None:
    service = _service(tmp_path, pg.reader_url)
    assert "1" in _ask(service, "SELECT array_agg(id) FROM plain")
    pg.admin.execute(_PG_CHANGES[change])
    _refused_after(service, change)


@pytest.mark.mysql
@pytest.mark.parametrize("change", sorted(_MY_CHANGES))
def test_mariadb_a_rename_or_new_masked_column_while_serving_refuses_until_restart(
    my: MysqlScratch, tmp_path: Path, change: str
) -> None:
    service = _service(tmp_path, my.reader_url)
    assert "p" in _ask(service, "SELECT name FROM plain")
    _my_run(my, *_MY_CHANGES[change])
    _refused_after(service, change)


def test_postgres_a_column_no_rule_matches_added_to_an_unmasked_table_still_serves(
    pg: PgScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, pg.reader_url)
    assert "p" in _ask(service, "SELECT name FROM plain")
    pg.admin.execute("ALTER TABLE plain ADD COLUMN note text; CREATE TABLE elsewhere (id int)")
    assert "p" in _ask(service, "SELECT name FROM plain WHERE id = 1")
    assert "1" in _ask(service, "SELECT array_agg(id) FROM customers")
    assert _ask(service, "SELECT id FROM elsewhere") == "REFUSED"  # unknown to the analysis


@pytest.mark.mysql
def test_mariadb_a_column_no_rule_matches_added_to_an_unmasked_table_still_serves(
    my: MysqlScratch, tmp_path: Path
) -> None:
    service = _service(tmp_path, my.reader_url)
    assert "p" in _ask(service, "SELECT name FROM plain")
    _my_run(my, "ALTER TABLE {db}.plain ADD COLUMN note VARCHAR(20)", "CREATE TABLE {db}.elsewhere (id INT)")
    assert "p" in _ask(service, "SELECT name FROM plain WHERE id = 1")
    assert "1" in _ask(service, "SELECT id FROM customers ORDER BY id")
    assert _ask(service, "SELECT id FROM elsewhere") == "REFUSED"  # unknown to the analysis


def test_postgres_a_table_created_earlier_on_the_name_path_refuses(pg: PgScratch, tmp_path: Path) -> None:
    """A new `app.plain` before `public` on the search_path: the database would read it for `plain`."""
    pg.admin.execute(
        f"CREATE SCHEMA app; GRANT USAGE ON SCHEMA app TO {pg.reader}; CREATE TABLE app.other (id int);"
        f" ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = app, public"
    )
    service = _service(tmp_path, pg.reader_url)
    assert "p" in _ask(service, "SELECT name FROM plain")
    pg.admin.execute(
        "CREATE TABLE app.plain AS SELECT id, 'q' AS name FROM plain;"
        f" GRANT SELECT ON app.plain TO {pg.reader}"
    )
    assert _ask(service, "SELECT name FROM plain") == "SOURCE_UNVERIFIED"


@pytest.mark.mysql
@pytest.mark.anyio
async def test_mariadb_a_role_maps_login_is_compared_with_what_it_saw_at_start_up(
    my: MysqlScratch, tmp_path: Path
) -> None:
    """`--role-map` with a login of its own: its calls run on an engine of their own, whose
    re-verification compares the tables that login saw at start-up."""
    from sqlalchemy.engine import make_url

    from tests.helpers import text_of
    from tests.sql.test_sql_reverify_identities import _caller, _code, _role_map_server

    alice = f"{my.reader}a"
    _my_run(
        my,
        f"CREATE USER '{alice}'@'%' IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS {READER_CONNECTIONS}",
        f"GRANT SELECT (id, name, tier) ON {{db}}.customers TO '{alice}'@'%'",
        f"GRANT SELECT ON {{db}}.plain TO '{alice}'@'%'",
    )
    masks = tmp_path / "masks.yaml"
    masks.write_text('masks:\n  - customers.email\n  - "*.ssn"\n')
    try:
        logins: dict[str, tuple[str, str | None]] = {"alice": ("role_a", alice)}
        dsn = make_url(my.reader_url).render_as_string(hide_password=False)
        with _role_map_server(dsn, tmp_path, logins, "--mask", str(masks)) as (url, token):
            async with _caller(url, token["alice"]) as ask:
                assert _code(await ask("SELECT name FROM plain")) == "OK"
                _my_run(my, *_MY_CHANGES["add"])
                refused = await ask("SELECT ssn FROM plain")
                assert _code(refused) == "SOURCE_UNVERIFIED" and "ssn-" not in text_of(refused)
    finally:
        _my_run(my, f"DROP USER '{alice}'@'%'")


def test_postgres_known_tables_swapped_with_the_same_columns_refuse(pg: PgScratch, tmp_path: Path) -> None:
    """Only the oids tell this swap: the columns and the mask expansion are those of start-up."""
    pg.admin.execute(
        "CREATE TABLE twin_a (id int, note text); CREATE TABLE twin_b (id int, note text);"
        f" GRANT SELECT ON twin_a, twin_b TO {pg.reader}"
    )
    service = _service(tmp_path, pg.reader_url)
    assert "rows sent" in _ask(service, "SELECT id FROM twin_a")
    pg.admin.execute(
        "BEGIN; ALTER TABLE twin_a RENAME TO twin_t; ALTER TABLE twin_b RENAME TO twin_a;"
        " ALTER TABLE twin_t RENAME TO twin_b; COMMIT;"
    )
    assert _ask(service, "SELECT id FROM twin_a") == "SOURCE_UNVERIFIED"


def test_postgres_an_unmasked_table_created_again_still_serves(pg: PgScratch, tmp_path: Path) -> None:
    """Dropped and created again under its name (a nightly reload): the rules apply by name and its
    grants are checked again; not a reason to stop serving."""
    service = _service(tmp_path, pg.reader_url)
    assert "p" in _ask(service, "SELECT name FROM plain")
    pg.admin.execute(
        "BEGIN; DROP TABLE plain; CREATE TABLE plain (id int PRIMARY KEY, name text, tier int);"
        f" INSERT INTO plain VALUES {_PLAIN}; GRANT SELECT ON plain TO {pg.reader}; COMMIT;"
    )
    assert "p" in _ask(service, "SELECT name FROM plain WHERE id = 1")
