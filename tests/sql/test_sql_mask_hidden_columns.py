"""DEFINER views over columns the account cannot see (red team rt27 F6).

MariaDB's information_schema lists only the columns an account holds a privilege on, so a generated
column over the masked `customers.email` (`e2 AS (LOWER(email))`), or a foreign-key copy of it, that
the reader was never granted was not derived as masked, and root's DEFINER view reading it, opted
in with `--allow view:` (for "runs as its definer"), answered every e-mail while start-up said ok.
Now a DEFINER view whose query the server refuses to prepare as the account counts as reading a
masked column; a generated column granted only through a role is derived under that role.
PostgreSQL's catalogs (pg_attribute, pg_attrdef, pg_depend) list every column to every role: the
PostgreSQL profile derives the same generated column as the reader (pinned below).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.cli import main
from mcpkit.sql.engines.engine import SqlEngine
from tests.sql.sql_support import MysqlScratch, PgScratch, masks_file, mysql_scratch, pg_scratch

SECRET = "@secret.example"
VIEWS = ("v_virtual", "v_stored", "v_copy", "v_outer", "v_inner", "v_other_db")
CLEAN = ("v_names", "v_calls")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def maria(mysql_url: str) -> Iterator[MysqlScratch]:
    """customers.email withheld by column grants; generated and foreign-key copies of it the reader
    was never granted; root's DEFINER views over them, and clean DEFINER views (controls)."""
    with mysql_scratch(mysql_url, "rt27c") as db:
        d, other, r = db.db, f"{db.db}_o", f"'{db.reader}'@'%'"
        with db.admin.cursor() as c:
            for sql in (
                f"CREATE TABLE {d}.customers (id int PRIMARY KEY, name varchar(20), email varchar(80),"
                " e2 varchar(80) AS (LOWER(email)) VIRTUAL, e3 varchar(80) AS (UPPER(email)) STORED,"
                " UNIQUE KEY (email)) ENGINE=InnoDB",
                f"INSERT INTO {d}.customers (id, name, email) VALUES (1, 'Ann', 'ann{SECRET}'),"
                f" (2, 'Bob', 'bob{SECRET}')",
                f"CREATE TABLE {d}.orders (id int PRIMARY KEY, ce varchar(80),"
                f" FOREIGN KEY (ce) REFERENCES {d}.customers (email)) ENGINE=InnoDB",
                f"INSERT INTO {d}.orders VALUES (1, 'ann{SECRET}')",
                # the reader's own function: its body is shown to it (a clean routine a view calls)
                f"CREATE DEFINER={r} FUNCTION {d}.f_up(s varchar(20)) RETURNS varchar(20) DETERMINISTIC"
                " RETURN UPPER(s)",
                f"GRANT EXECUTE ON FUNCTION {d}.f_up TO {r}",
                f"CREATE VIEW {d}.v_virtual AS SELECT id, e2 AS k FROM {d}.customers",
                f"CREATE VIEW {d}.v_stored AS SELECT id FROM {d}.customers WHERE e3 LIKE 'ANN%'",
                f"CREATE VIEW {d}.v_copy AS SELECT id, ce AS k FROM {d}.orders",
                f"CREATE SQL SECURITY INVOKER VIEW {d}.v_inner AS SELECT c.id, c.e2 AS k"
                f" FROM {d}.customers c",
                f"CREATE VIEW {d}.v_outer AS SELECT id, k FROM {d}.v_inner",
                f"CREATE VIEW {d}.v_names AS SELECT c.id, c.name FROM {d}.customers c",
                f"CREATE VIEW {d}.v_calls AS SELECT id, {d}.f_up(name) AS n FROM {d}.customers",
                f"CREATE DATABASE {other}",
                f"CREATE VIEW {other}.v_other_db AS SELECT id, e2 AS k FROM {d}.customers",
                f"CREATE VIEW {other}.v_calls AS SELECT id, {d}.f_up(name) AS n FROM {d}.customers",
                f"GRANT SELECT (id, name) ON {d}.customers TO {r}",
                f"GRANT SELECT (id) ON {d}.orders TO {r}",
            ):
                c.execute(sql)
            for view in (*VIEWS, *CLEAN):
                home = other if view == "v_other_db" else d
                c.execute(f"GRANT SELECT, SHOW VIEW ON {home}.{view} TO {r}")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {other}.v_calls TO {r}")
        try:
            yield db
        finally:
            with db.admin.cursor() as c:
                c.execute(f"DROP DATABASE IF EXISTS {other}")


def _allow(db: MysqlScratch, views: tuple[str, ...]) -> list[str]:
    out = ["--allow", f"routine:{db.db}.f_up", "--allow", f"view:{db.db}_o.v_calls"]
    out += ["--allow", f"function-order:{db.db}.f_up"]  # a stored function over masked reads: per-row
    for view in views:
        home = f"{db.db}_o" if view == "v_other_db" else db.db
        out += ["--allow", f"view:{home}.{view}", "--allow", f"view-order:{home}.{view}"]
    return out


def _drop(db: MysqlScratch, *views: str) -> None:
    with db.admin.cursor() as c:
        for view in views:
            home = f"{db.db}_o" if view == "v_other_db" else db.db
            c.execute(f"DROP VIEW {home}.{view}")


@pytest.mark.mysql
def test_mariadb_definer_view_over_a_hidden_generated_column_is_refused(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    masks = masks_file(tmp_path, "customers.email")
    base = ["--dsn", db.reader_url, "--mask", masks, *_allow(db, VIEWS + CLEAN)]
    for view in ("v_virtual", "v_copy", "v_outer"):
        code, out = _run(capsys, "sql", "query", *base, f"SELECT * FROM {view}")
        assert code == 2 and SECRET not in out, (view, out)  # before: | 1 | ann@secret.example |
        for tainted in ("v_virtual", "v_stored", "v_copy", "v_outer"):
            assert f"view `{db.db}`.`{tainted}`: it reads a column or relation this account cannot see" in out
        assert f"view `{db.db}_o`.`v_other_db`: it reads a column" in out, out
        for clean in CLEAN:
            assert f"`.`{clean}`:" not in out, out  # clean DEFINER views, in either database
    code, out = _run(capsys, "sql", "doctor", *base)
    assert code != 0 and f"fail masks: view `{db.db}`.`v_virtual`: it reads a column" in out, out


@pytest.mark.mysql
def test_mariadb_clean_definer_views_still_serve(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = maria
    _drop(db, *VIEWS)
    base = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email"), *_allow(db, CLEAN)]
    code, out = _run(capsys, "sql", "query", *base, "SELECT id, name FROM v_names ORDER BY id")
    assert code == 0 and "Ann" in out and SECRET not in out, out
    code, out = _run(capsys, "sql", "query", *base, "SELECT id, n FROM v_calls ORDER BY id")
    assert code == 0 and "ANN" in out, out


@pytest.mark.mysql
def test_mariadb_generated_column_granted_through_a_role_is_derived(
    maria: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, role = maria, f"{maria.reader}_role"
    _drop(db, *VIEWS)
    with db.admin.cursor() as c:
        c.execute(f"CREATE ROLE {role}")
        c.execute(f"GRANT SELECT (e2) ON {db.db}.customers TO {role}")
        c.execute(f"GRANT {role} TO '{db.reader}'@'%'")  # not a default role: one SET ROLE away
    try:
        base = ["--dsn", db.reader_url, "--mask", masks_file(tmp_path, "customers.email"), *_allow(db, CLEAN)]
        code, out = _run(capsys, "sql", "query", *base, "SELECT id FROM v_names")
        assert code == 2, out
        assert f"can read masked column(s) e2 of `{db.db}`.`customers` through role `{role}`" in out, out
    finally:
        with db.admin.cursor() as c:
            c.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt27c") as db:
        with db.admin.cursor() as c:
            c.execute(
                "CREATE TABLE customers (id int PRIMARY KEY, name text, email text,"
                " e2 text GENERATED ALWAYS AS (lower(email)) STORED)"
            )
            c.execute(f"GRANT SELECT (id, name) ON customers TO {db.reader}")
        yield db


@pytest.mark.postgres
def test_postgres_derives_a_generated_column_the_reader_cannot_select(pg: PgScratch) -> None:
    engine = SqlEngine(pg.reader_url)
    try:
        with engine.session(10.0, "test") as (conn, _):
            derived = engine.profile.derived_masks(conn, {"customers": frozenset({"email"})})
    finally:
        engine.close()
    assert [sorted(d.columns) for d in derived] == [["e2"]], derived
