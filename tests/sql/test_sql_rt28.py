"""Red team rt28 F1 and F3 (PostgreSQL).

F1: PostgreSQL cuts a name to 63 bytes, so `<63 q>x.record_out FROM customers <63 q>y` named the
alias there while admission saw a qualifier of no FROM item and checked nothing: record_out(row)
ran. Now a name past 63 bytes is refused (`too_long`), and so is a qualifier no FROM item has.

F3: `CREATE POLICY p ON customers FOR SELECT USING (email < 'k')` filtered the rows on the masked
e-mail (PostgreSQL checks no column privilege inside a policy), with no finding. Now a policy that
reads a masked column, or the whole row of a masked table, is a `policy-order:` finding, and
`grant --mask` leaves its table out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission import admit
from mcpkit.sql.errors import Refused
from tests.sql.sql_support import PgScratch, masks_file, pg_scratch
from tests.sql.sql_support import run_cli as _run

A = "q" * 63
E = "é" * 32  # 64 bytes, 32 characters

REFUSED = [
    f"SELECT {A}x.record_out FROM customers {A}y LIMIT 1",
    f"SELECT {A}x.hash_record FROM customers {A}y LIMIT 1",
    f"WITH {A}x AS (SELECT 1 AS a) SELECT {A}y.record_out FROM {A}z",
    f'SELECT "{E}".record_out FROM customers "{E[:-1]}ê" LIMIT 1',
]


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt28fix") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, email text, name text);
            INSERT INTO customers VALUES (1, 'user1@x.com', 'n1'), (2, 'zed@x.com', 'n2'),
              (3, 'amy@x.com', 'n3');
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            """
        )
        yield db


@pytest.mark.parametrize("sql", REFUSED)
def test_a_name_postgres_shortens_is_refused_before_the_database(sql: str) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, "postgres")
    assert info.value.data == {"reason": "too_long"}


def test_a_qualifier_of_no_from_item_is_refused() -> None:
    from tests.sql.test_sql_attribute_scopes import _Columns

    with pytest.raises(Refused) as info:
        admit("SELECT zz.name FROM items y", "postgres", catalog=_Columns())  # type: ignore[arg-type]
    assert info.value.data == {"reason": "attribute_call"}


def test_names_of_63_bytes_and_other_engines_pass() -> None:
    admit(f"SELECT {A}.id FROM items {A}", "postgres")
    admit(f'SELECT "{E[:-1]}" FROM items', "postgres")
    admit(f"SELECT {A}x FROM items", "mysql")  # MariaDB refuses a name past 64 itself (error 1059)


@pytest.mark.postgres
@pytest.mark.parametrize("sql", REFUSED)
def test_postgres_a_shortened_qualifier_runs_no_function(
    pg: PgScratch, capsys: pytest.CaptureFixture[str], sql: str
) -> None:
    pg.admin.execute(f"GRANT SELECT ON customers TO {pg.reader}")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--allow", "unbounded-memory", sql)
    assert code != 0, out  # before: (1,user1@x.com,n1)
    assert "user1@x.com" not in out and "(1)" not in out, out


@pytest.mark.postgres
@pytest.mark.parametrize(
    "using",
    [
        "email < 'k'",
        "split_part(trim(both '()' from customers::text), ',', 2) < 'k'",
    ],
)
def test_postgres_a_policy_reading_a_masked_column_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], using: str
) -> None:
    pg.admin.execute(
        "ALTER TABLE customers ENABLE ROW LEVEL SECURITY;"
        f" CREATE POLICY by_mail ON customers FOR SELECT USING ({using})"
    )
    sql = "SELECT string_agg(id::text, ',' ORDER BY id) AS s FROM customers"
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, sql)
    assert code == 2, out  # before: | 3 | (the ids whose e-mail < 'k')
    assert "policy public.customers.by_mail" in out and "reads a masked column" in out, out
    assert "--allow policy-order:public.customers.by_mail" in out, out
    allow = ["--allow", "policy-order:public.customers.by_mail"]
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, *allow, sql)
    assert code == 0 and "| 3 |" in out, out
    reader = f"{pg.reader}_g"
    code, out = _run(
        capsys, "sql", "grant", "--dsn", pg.admin_url, "--role", reader,
        "--tables", "public.customers", "--mask", masks_file(tmp_path, "customers.email"),
    )  # fmt: skip
    assert code == 0, out
    assert "ON public.customers TO" not in out and "-- left out: table public.customers" in out, out


@pytest.mark.postgres
def test_postgres_a_policy_on_an_unmasked_column_passes(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        "ALTER TABLE customers ENABLE ROW LEVEL SECURITY;"
        " CREATE POLICY by_id ON customers FOR SELECT USING (id < 3)"
    )
    sql = "SELECT string_agg(id::text, ',' ORDER BY id) AS s FROM customers"
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, sql)
    assert code == 0 and "1,2" in out, out
