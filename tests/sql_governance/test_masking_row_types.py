"""Red team rt19mask F1: on PostgreSQL a column typed by a masked table's row (`snap accounts`, a
snapshot or audit table) holds the masked column; `grant --mask` granted it, doctor said the
database withheld every masked column, and `SELECT * FROM snaps` answered the e-mails. Such a column
(also an array of the row type, a domain, range or composite over it, at any depth) is a copy now:
derived and masked to a fixpoint with the other copies, refused at start-up where the account reads
it, and withheld by `grant --mask`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking import MASKED
from tests.helpers import run_mcpkit
from tests.sql.sql_support import apply_grant, pg_admin, pg_scratch
from tests.sql_governance.support import serve_masked

SECRET = "acc1@secret.example"
SETUP = (
    "CREATE TABLE accounts (id int PRIMARY KEY, email text)",
    f"INSERT INTO accounts VALUES (1, '{SECRET}')",
    "CREATE TABLE snaps (id int PRIMARY KEY, snap accounts, note text)",
    "INSERT INTO snaps SELECT id, a, 'n' FROM accounts a",
    "CREATE TYPE wrap AS (a accounts, n int)",
    "CREATE DOMAIN acc_d AS accounts",
    "CREATE TYPE acc_r AS RANGE (subtype = accounts)",
    "CREATE TABLE shapes (id int PRIMARY KEY, arr accounts[], w wrap[], d acc_d, r acc_r, plain text)",
    "INSERT INTO shapes SELECT id, ARRAY[a], ARRAY[ROW(a, 1)::wrap], a, NULL, 'p' FROM accounts a",
    "CREATE TABLE nested (id int PRIMARY KEY, s snaps)",  # a row that holds a row that holds one
    "INSERT INTO nested SELECT id, s FROM snaps s",
    "CREATE VIEW acc_v AS SELECT id, email FROM accounts",  # a view's row holds what it reads
    "CREATE VIEW acc_ids AS SELECT id FROM accounts",
    "CREATE TABLE vsnaps (id int PRIMARY KEY, v acc_v, w acc_ids)",
    "INSERT INTO vsnaps SELECT id, v, ROW(id)::acc_ids FROM acc_v v",
)


@pytest.mark.postgres
def test_postgres_refuses_an_account_that_reads_a_row_typed_copy(pg_url: str, tmp_path: Path) -> None:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - accounts.email\n")
    with pg_scratch(pg_url, "maskfix2_rowtype") as pg:
        for sql in SETUP:
            pg.admin.execute(sql)
        pg.admin.execute(f"GRANT SELECT (id) ON accounts TO {pg.reader}")
        pg.admin.execute(f"GRANT SELECT ON snaps, shapes, nested, vsnaps TO {pg.reader}")
        before = run_mcpkit("sql", "query", "--dsn", pg.reader_url, "SELECT snap::text FROM snaps")
        assert SECRET in before.stdout  # what the account reads without masks
        with pytest.raises(SqlConfigError) as info:
            serve_masked(pg.reader_url, masks).engine.close()  # type: ignore[attr-defined]
        said = str(info.value)
        assert "snap of public.snaps" in said, said
        assert "arr, w, d, r of public.shapes" in said, said
        assert "GRANT SELECT (id, plain) ON public.shapes" in said, said
        assert "s of public.nested" in said, said
        assert "v of public.vsnaps" in said and "GRANT SELECT (id, w) ON public.vsnaps" in said, said


@pytest.mark.postgres
def test_postgres_grant_withholds_a_row_typed_copy_and_serve_masks_it(pg_url: str, tmp_path: Path) -> None:
    masks = tmp_path / "masks.yaml"
    masks.write_text("masks:\n  - accounts.email\n")
    with pg_scratch(pg_url, "maskfix2_rowgrant") as pg:
        for sql in SETUP:
            pg.admin.execute(sql)
        reader = f"{pg.reader}_g"
        tables = "public.accounts,public.snaps,public.shapes,public.nested,public.vsnaps"
        done = run_mcpkit(
            "sql", "grant", "--dsn", pg.admin_url, "--role", reader, "--tables", tables, "--mask", str(masks)
        )
        assert done.returncode == 0, done.stderr
        assert f'GRANT SELECT ("id", "note") ON public.snaps TO "{reader}"' in done.stdout, done.stdout
        assert f'GRANT SELECT ("id", "plain") ON public.shapes TO "{reader}"' in done.stdout, done.stdout
        assert f'GRANT SELECT ("id") ON public.nested TO "{reader}"' in done.stdout, done.stdout
        assert f'GRANT SELECT ("id", "w") ON public.vsnaps TO "{reader}"' in done.stdout, done.stdout
        try:
            url = apply_grant(pg.admin_url, reader, done.stdout)
            service = serve_masked(url, masks)  # start-up accepts what grant wrote
            try:
                for sql in ("SELECT * FROM snaps", "SELECT snap::text FROM snaps", "SELECT * FROM nested"):
                    result, _ = service.query(sql, call_id="t", max_rows=10)
                    assert SECRET not in str(result.rows), result.rows
                result, _ = service.query("SELECT * FROM snaps", call_id="t", max_rows=10)
                assert result.rows == [[1, MASKED, "n"]], result.rows
            finally:
                service.engine.close()  # type: ignore[attr-defined]
        finally:
            pg.admin.execute(f"DROP OWNED BY {reader}")
            with pg_admin(pg_url) as c:
                c.execute(f"DROP ROLE IF EXISTS {reader}")
