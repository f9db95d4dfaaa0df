"""Red team mask17 F5: a literal mask rule that matched no column (a typo `peple.ssn`, or a column a
migration renamed) was silently ignored: start-up and `doctor --mask` said ok and the column was
served in clear. Now a literal rule naming a table or column that does not exist stops start-up
with the file, the line and what is wrong (PostgreSQL, SQLite; on MariaDB where it can be told),
and doctor prints it as `fail`; globs stay lenient."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.maskcheck import enforce_masks, prepare_masks
from tests.sql.sql_support import mcpkit_here, mysql_scratch, pg_scratch

SSN, TOKEN = "123-45-6789", "tok_SECRETVALUE_1"
TYPOS = "masks:\n  - customers.email\n  - peple.ssn\n  - tokens.tokn\n  - '*.nothing_here'\n"


def _prepare(url: str, masks: Path) -> None:
    engine = SqlEngine(url)
    try:
        _, _, masked = prepare_masks(engine, str(masks))
        enforce_masks(engine, masked)
    finally:
        engine.close()


def _sqlite(tmp_path: Path) -> str:
    path = tmp_path / "maskfix_typo.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
        db.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, ssn TEXT)")
        db.execute("CREATE TABLE tokens (id INTEGER PRIMARY KEY, tok TEXT)")
        db.execute(f"INSERT INTO people VALUES (1, '{SSN}')")
        db.execute(f"INSERT INTO tokens VALUES (1, '{TOKEN}')")
    db.close()
    return f"sqlite:///{path}"


def test_sqlite_a_literal_rule_matching_nothing_refuses_start_up_with_its_line(tmp_path: Path) -> None:
    dsn, masks = _sqlite(tmp_path), tmp_path / "masks.yaml"
    masks.write_text(TYPOS)
    with pytest.raises(SqlConfigError) as raised:
        _prepare(dsn, masks)
    message = str(raised.value)
    assert f"{masks}:3: mask 'peple.ssn' matches no column: there is no table or view peple" in message
    assert f"{masks}:4: mask 'tokens.tokn' matches no column: tokens has no column tokn" in message
    assert "nothing_here" not in message  # a glob may match nothing
    done = mcpkit_here("sql", "doctor", "--dsn", dsn, "--mask", str(masks))
    fails = [line for line in done.stdout.splitlines() if line.startswith("fail") and "masks" in line]
    assert len(fails) == 2 and done.returncode != 0, done.stdout
    served = mcpkit_here("sql", "query", "--dsn", dsn, "--mask", str(masks), "SELECT * FROM people")
    assert served.returncode != 0 and SSN not in served.stdout + served.stderr
    assert "peple.ssn" in served.stderr
    # The column renamed by a migration: the rule that named it stops the next start-up.
    masks.write_text("masks:\n  - people.ssn\n")
    with sqlite3.connect(dsn.removeprefix("sqlite:///")) as db:
        db.execute("ALTER TABLE people RENAME COLUMN ssn TO ssn_number")
    db.close()
    with pytest.raises(SqlConfigError, match="people has no column ssn"):
        _prepare(dsn, masks)


@pytest.mark.postgres
def test_postgres_a_literal_rule_matching_nothing_refuses_start_up(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "maskfix_typo") as pg:
        pg.admin.execute("CREATE TABLE customers (id int PRIMARY KEY, email text)")
        pg.admin.execute("CREATE TABLE leads (id int PRIMARY KEY, email text)")
        pg.admin.execute("CREATE SCHEMA hr")
        pg.admin.execute("CREATE TABLE hr.staff (id int, salary int)")  # no USAGE for the reader
        pg.admin.execute(f"INSERT INTO leads VALUES (1, '{SSN}')")
        pg.admin.execute(f"GRANT SELECT (id) ON customers, leads TO {pg.reader}")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - leads.emial\n  - hr.staff.salary\n")
        with pytest.raises(SqlConfigError) as raised:
            _prepare(pg.reader_url, masks)
        assert f"{masks}:3: mask 'leads.emial' matches no column: leads has no column emial" in str(
            raised.value
        )
        assert "salary" not in str(raised.value)  # exists, in a schema the reader cannot use
        masks.write_text("masks:\n  - customers.email\n  - leads.email\n  - hr.staff.salary\n")
        _prepare(pg.reader_url, masks)


@pytest.mark.mysql
def test_mariadb_refuses_what_it_can_tell_and_warns_about_an_invisible_table(
    mysql_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with mysql_scratch(mysql_url, "maskfix_typo") as my:
        reader = f"'{my.reader}'@'%'"
        with my.admin.cursor() as c:
            c.execute(f"CREATE TABLE {my.db}.customers (id INT PRIMARY KEY, email VARCHAR(40))")
            c.execute(f"CREATE TABLE {my.db}.tokens (id INT PRIMARY KEY, tok VARCHAR(40))")
            c.execute(f"INSERT INTO {my.db}.tokens VALUES (1, '{TOKEN}')")
            c.execute(f"GRANT SELECT (id) ON {my.db}.customers TO {reader}")
            c.execute(f"GRANT SELECT ON {my.db}.tokens TO {reader}")  # read whole: its columns are all listed
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - tokens.tokn\n  - peple.ssn\n")
        with pytest.raises(SqlConfigError) as raised:
            _prepare(my.reader_url, masks)
        message = str(raised.value)
        assert f"{masks}:3: mask 'tokens.tokn' matches no column: tokens has no column tokn" in message
        assert "peple" not in message and "customers" not in message
        with my.admin.cursor() as c:
            c.execute(f"REVOKE SELECT ON {my.db}.tokens FROM {reader}")
            c.execute(f"GRANT SELECT (id) ON {my.db}.tokens TO {reader}")
        masks.write_text("masks:\n  - customers.email\n  - customers.emial\n  - tokens.tok\n  - peple.ssn\n")
        with caplog.at_level("WARNING", logger="mcpkit.sql"):
            _prepare(my.reader_url, masks)  # column grants: emial cannot be told from a withheld column
        assert "mask 'peple.ssn' matches no column: no table or view peple is visible" in caplog.text


@pytest.mark.postgres
def test_postgres_grant_refuses_a_literal_rule_matching_nothing(pg_url: str, tmp_path: Path) -> None:
    # grant printed SQL for a reader `serve` then refused: it refuses first, as start-up would.
    with pg_scratch(pg_url, "maskleft_grant") as pg:
        pg.admin.execute("CREATE TABLE customers (id int PRIMARY KEY, email text)")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - peple.ssn\n  - customers.emial\n")
        args = ("sql", "grant", "--dsn", pg.admin_url, "--role", f"{pg.reader}_g", "--tables", "customers")
        done = mcpkit_here(*args, "--mask", str(masks))
        assert done.returncode == 2 and "GRANT" not in done.stdout, done.stdout
        assert (
            f"{masks}:3: mask 'peple.ssn' matches no column: there is no table or view peple" in done.stderr
        )
        assert f"{masks}:4: mask 'customers.emial' matches no column: customers has no column" in done.stderr
        masks.write_text("masks:\n  - customers.email\n")
        done = mcpkit_here(*args, "--mask", str(masks))
        assert done.returncode == 0 and 'GRANT SELECT ("id") ON public.customers' in done.stdout, done.stderr


@pytest.mark.mysql
def test_mariadb_grant_refuses_a_missing_column_and_warns_about_an_invisible_table(
    mysql_url: str, tmp_path: Path
) -> None:
    with mysql_scratch(mysql_url, "maskleft_grant") as my:
        with my.admin.cursor() as c:
            c.execute(f"CREATE TABLE {my.db}.customers (id INT PRIMARY KEY, email VARCHAR(40))")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - customers.emial\n")
        args = ("sql", "grant", "--dsn", my.admin_url, "--role", f"{my.reader}g", "--tables", "customers")
        done = mcpkit_here(*args, "--mask", str(masks))
        assert done.returncode == 2 and "GRANT" not in done.stdout, done.stdout
        assert f"{masks}:3: mask 'customers.emial' matches no column: customers has no column" in done.stderr
        masks.write_text("masks:\n  - customers.email\n  - peple.ssn\n")
        done = mcpkit_here(*args, "--mask", str(masks))
        assert done.returncode == 0 and "GRANT SELECT (`id`)" in done.stdout, done.stderr
        assert "warning: " in done.stderr and "peple.ssn" in done.stderr
