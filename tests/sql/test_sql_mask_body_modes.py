r"""Stored bodies read under other lexical rules than the engine runs them with (red team rt30 F4, F4b).

- F4 MariaDB: a function created under `sql_mode=NO_BACKSLASH_ESCAPES` with the body
  `... GROUP_CONCAT(id ORDER BY 'a\' ', id /* ' /* */ ...)`: the check read it in the default mode
  (a string, the primary key, a comment) while the server ran it under its stored mode (two
  adjacent strings: ORDER BY a constant), so the call answered the ids in e-mail index order.
- F4b PostgreSQL: a SQL function with `SET standard_conforming_strings = off` and the body
  `... ORDER BY 'a\', id, ' -- '` + newline: one string and a comment for PostgreSQL, the primary
  key for the check; `--allow function-config:` (the setting's opt-in) let it through.

A body stored under such a mode or setting is now unreadable: refused by the order check, opt-in
`function-order:` only. The same body under the default mode / settings passes as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.profiles.mysql.body_modes import foreign_flags
from mcpkit.sql.profiles.postgres.body_settings import foreign_settings
from tests.sql.sql_support import (
    MysqlScratch,
    PgScratch,
    masks_file,
    mysql_customers,
    mysql_scratch,
    pg_customers,
    pg_scratch,
    row_order_routines,
    run_cli,
)

# The ids of `sql_support.CUSTOMERS_ROWS` in e-mail order.
RANKING = "4,1,5,2,3"
REVERSED = "3,2,5,1,4"  # MariaDB's GROUP_CONCAT over the e-mail index, ordered by a constant
REFUSED = "may answer in the scan order of a masked table"
MY_BODY = r"RETURN (SELECT GROUP_CONCAT(id ORDER BY 'a\' ', id /* ' /* */ SEPARATOR ',') FROM customers)"
PG_BODY = "SELECT string_agg(id::text, ',' ORDER BY 'a\\', id, ' -- '\n) FROM customers"


@pytest.fixture
def my(mysql_url: str) -> Iterator[MysqlScratch]:
    with mysql_scratch(mysql_url, "rt30c") as db:
        mysql_customers(db)
        yield db


def _my_function(db: MysqlScratch, name: str, mode: str) -> None:
    """A function whose body the reader may read (its definer), under `mode`, granted to the reader."""
    with db.admin.cursor() as c:
        c.execute(f"SET SESSION sql_mode = '{mode}'")
        try:
            c.execute(
                f"CREATE DEFINER = '{db.reader}'@'%' FUNCTION {db.db}.{name}() RETURNS TEXT"
                f" SQL SECURITY INVOKER READS SQL DATA {MY_BODY.replace('FROM ', f'FROM {db.db}.')}"
            )
        finally:
            c.execute("SET SESSION sql_mode = DEFAULT")
        c.execute(f"GRANT EXECUTE ON FUNCTION {db.db}.{name} TO '{db.reader}'@'%'")


@pytest.mark.mysql
def test_mariadb_a_body_stored_under_no_backslash_escapes_is_unreadable(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _my_function(my, "f_nbe", "NO_BACKSLASH_ESCAPES")
    _my_function(my, "f_plain", "STRICT_TRANS_TABLES")  # the same body, read alike: by the primary key
    with my.admin.cursor() as c:
        c.execute(f"SELECT {my.db}.f_nbe(), {my.db}.f_plain()")
        assert c.fetchone() == (REVERSED, "1,2,3,4,5")  # what the red team read: the e-mail ranking
    masks = masks_file(tmp_path, "customers.email")
    allow = [
        a
        for f in ("f_nbe", "f_plain")
        for o in ("routine", "function")
        for a in ("--allow", f"{o}:{my.db}.{f}")
    ]
    args = ["sql", "query", "--dsn", my.reader_url, "--mask", masks, *allow]
    code, out = run_cli(capsys, *args, f"SELECT {my.db}.f_nbe() AS a")
    assert code == 2, out  # before: | 3,2,5,1,4 |
    assert REVERSED not in out
    assert (
        f"function {my.db}.f_nbe {REFUSED}: its body is stored under sql_mode NO_BACKSLASH_ESCAPES" in out
    ), out
    assert f"--allow function-order:{my.db}.f_nbe" in out
    assert f"{my.db}.f_plain " not in out, out  # control: read as before, ordered by its key
    code, out = run_cli(
        capsys, *args, "--allow", f"function-order:{my.db}.f_nbe", f"SELECT {my.db}.f_plain() AS b"
    )
    assert code == 0, out
    assert "| 1,2,3,4,5 |" in out


@pytest.mark.mysql
def test_mariadb_a_view_calling_a_body_under_another_mode_counts_as_reading_a_masked_column(
    my: MysqlScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A DEFINER view runs what it calls with its definer's rights: a body this check cannot read as
    # the server does counts as reading a masked column, as a hidden one does.
    with my.admin.cursor() as c:
        c.execute(f"CREATE TABLE {my.db}.plain (id int PRIMARY KEY)")
        c.execute(f"GRANT SELECT ON {my.db}.plain TO '{my.reader}'@'%'")
        for name, mode in (("g_ansi", "ANSI_QUOTES"), ("g_plain", "")):
            c.execute(f"SET SESSION sql_mode = '{mode}'")
            c.execute(
                f"CREATE DEFINER = '{my.reader}'@'%' FUNCTION {my.db}.{name}() RETURNS INT"
                f" SQL SECURITY INVOKER READS SQL DATA RETURN (SELECT COUNT(*) FROM {my.db}.plain)"
            )
            c.execute("SET SESSION sql_mode = DEFAULT")
            c.execute(f"GRANT EXECUTE ON FUNCTION {my.db}.{name} TO '{my.reader}'@'%'")
            c.execute(f"CREATE SQL SECURITY DEFINER VIEW {my.db}.v_{name} AS SELECT {my.db}.{name}() AS n")
            c.execute(f"GRANT SELECT, SHOW VIEW ON {my.db}.v_{name} TO '{my.reader}'@'%'")
    masks = masks_file(tmp_path, "customers.email")
    allow = [
        a
        for o in ("routine:{d}.g_ansi", "routine:{d}.g_plain", "view:{d}.v_g_ansi", "view:{d}.v_g_plain")
        for a in ("--allow", o.format(d=my.db))
    ]
    code, out = run_cli(
        capsys, "sql", "query", "--dsn", my.reader_url, "--mask", masks, *allow, "SELECT 1 AS x"
    )
    assert code == 2, out  # before: | 1 |
    assert (
        f"view `{my.db}`.`v_g_ansi`: it calls function g_ansi, which has a body stored under"
        " sql_mode ANSI_QUOTES" in out
    ), out
    assert "v_g_plain" not in out, out


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt30c") as db:
        pg_customers(db)
        yield db


@pytest.mark.postgres
def test_postgres_a_string_body_under_its_own_standard_conforming_strings_off_is_unreadable(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quoted = "'" + PG_BODY.replace("'", "''") + "'"
    for name, clause in (
        ("f_scs", "SET standard_conforming_strings = off"),
        ("f_std", "SET work_mem = '4MB'"),
    ):
        pg.admin.execute(f"CREATE FUNCTION {name}() RETURNS text LANGUAGE sql STABLE {clause} AS {quoted}")
        pg.admin.execute(f"GRANT EXECUTE ON FUNCTION {name}() TO {pg.reader}")
    assert pg.admin.execute("SELECT f_scs(), f_std()").fetchone() == (RANKING, "1,2,3,4,5")
    masks = masks_file(tmp_path, "customers.email")
    allow = [
        a
        for f in ("f_scs", "f_std")
        for o in ("function", "function-config")
        for a in ("--allow", f"{o}:public.{f}")
    ]
    args = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow]
    code, out = run_cli(capsys, *args, "SELECT public.f_scs() AS a")
    assert code == 2, out  # before: | 4,1,5,2,3 |
    assert RANKING not in out
    assert f"function public.f_scs {REFUSED}: its own setting standard_conforming_strings=off" in out, out
    assert "--allow function-order:public.f_scs" in out
    assert "public.f_std " not in out, out  # control: a setting that reads alike, checked as before
    opt_in = [a for f in ("f_scs", "f_std") for a in ("--allow", f"function-order:public.{f}")]
    code, out = run_cli(capsys, *args, *opt_in, "SELECT public.f_std() AS b")  # a user function: per-row
    assert code == 0, out
    assert "| 1,2,3,4,5 |" in out


# --- the tables ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "flags"),
    [
        ("STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION", ""),
        ("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE", ""),
        ("", ""),
        ("NO_BACKSLASH_ESCAPES", "NO_BACKSLASH_ESCAPES"),
        ("STRICT_TRANS_TABLES,ANSI_QUOTES", "ANSI_QUOTES"),
        (
            "PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ORACLE,NO_KEY_OPTIONS",
            "PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ORACLE",
        ),
        ("HIGH_NOT_PRECEDENCE", "HIGH_NOT_PRECEDENCE"),
        ("SOME_FUTURE_FLAG", "SOME_FUTURE_FLAG"),
    ],
)
def test_mysql_modes_outside_the_table_count(mode: str, flags: str) -> None:
    assert foreign_flags(mode) == flags


@pytest.mark.parametrize(
    ("config", "found"),
    [
        (None, ""),
        (["search_path=public", "work_mem=4MB", "enable_seqscan=off", "TimeZone=UTC"], ""),
        (["standard_conforming_strings=off"], "standard_conforming_strings=off"),
        (["backslash_quote=on", "search_path=x"], "backslash_quote=on"),
        (["transform_null_equals=on"], "transform_null_equals=on"),
        (["myext.mode=1"], "myext.mode=1"),
    ],
)
def test_postgres_settings_outside_the_table_count(config: list[str] | None, found: str) -> None:
    assert foreign_settings(config) == found


@pytest.mark.mysql
def test_mariadb_a_body_under_another_mode_counts_as_per_row(my: MysqlScratch) -> None:
    # The per-row proof (rt29 F1/F2) read a body itself: one stored under NO_BACKSLASH_ESCAPES reads
    # otherwise on the server (`'a\' , @c := ...` hides an assignment from the default reading). No
    # body is read any more: each stored function counts, whatever its mode.

    with my.admin.cursor() as c:
        for name, mode in (("f_pure_nbe", "NO_BACKSLASH_ESCAPES"), ("f_pure", "STRICT_TRANS_TABLES")):
            c.execute(f"SET SESSION sql_mode = '{mode}'")
            try:
                c.execute(
                    f"CREATE DEFINER = '{my.reader}'@'%' FUNCTION {my.db}.{name}(x INT) RETURNS INT"
                    " DETERMINISTIC SQL SECURITY INVOKER NO SQL RETURN (x * 2 + 1)"
                )
            finally:
                c.execute("SET SESSION sql_mode = DEFAULT")
    found = row_order_routines(my.reader_url)
    assert (my.db, "f_pure_nbe") in found and (my.db, "f_pure") in found, found
