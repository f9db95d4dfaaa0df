"""Materialized views under `--mask` on PostgreSQL (red team rt33c N1).

A materialized view reads its relations with its owner's rights, so start-up refuses one a
superuser owns (opt-in `--allow view:S.N`). `grant --mask` printed `GRANT SELECT ON` it and, at the
end, the REVOKE that takes it back; it now leaves the grant out and says why, so what it prints
starts clean as printed. With the opt-in, every query on the view was refused as naming a table
the server cannot resolve (masking reflected views, not materialized ones); it is now answered,
ordered like any view (its stored rows were written in the masked table's scan order). One that
copies a masked column stays refused whatever the opt-in. MariaDB has no materialized views.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mcpkit.cli import main
from tests.sql.sql_support import PgScratch, masks_file, pg_admin, pg_scratch

pytestmark = pytest.mark.postgres

SECRET = "@secret.example"
# Ids out of e-mail order, rows written in e-mail order: a scan-ordered answer lists 4, 1, 5, 2, 3.
ROWS = [(4, "Dan", "a"), (1, "Ann", "b"), (5, "Eve", "c"), (2, "Bob", "d"), (3, "Cy", "e")]


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "matview") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            CREATE INDEX ON customers (email);
            INSERT INTO customers VALUES {rows};
            CREATE MATERIALIZED VIEW cust_mv AS SELECT id, name FROM customers;
            CREATE MATERIALIZED VIEW cust_mv_e AS SELECT id, email FROM customers;
            """
        )
        yield db


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_grant_leaves_a_superuser_matview_out_and_its_output_starts_clean(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    role = f"{pg.reader}_g"
    masks = masks_file(tmp_path, "customers.email")
    monkeypatch.setenv("RT33MV_PW", "pw")
    code, out = _run(
        capsys, "sql", "grant", "--dsn", pg.admin_url, "--role", role, "--password-env", "RT33MV_PW",
        "--tables", "public.customers,public.cust_mv,public.cust_mv_e", "--mask", masks,
    )  # fmt: skip
    assert code == 0, out
    for view in ("cust_mv", "cust_mv_e"):
        assert f"ON public.{view} " not in out, out  # neither granted nor revoked afterwards
        assert (
            f"-- left out: materialized view public.{view} reads its relations with its owner's rights"
            " and its owner postgres is a superuser; no grant on it"
        ) in out, out
    assert f'GRANT SELECT ("id", "name") ON public.customers TO "{role}";' in out, out
    lines = out.splitlines()
    statements = [line.rstrip(";") for line in lines if line.startswith(("CREATE", "GRANT", "ALTER"))]
    try:
        for statement in statements:
            pg.admin.execute(statement)
        url = make_url(pg.reader_url).set(username=role).render_as_string(hide_password=False)
        count = "SELECT count(*) AS n FROM customers"
        code, out = _run(capsys, "sql", "query", "--dsn", url, "--mask", masks, count)
        assert code == 0, out
        assert "| 5 |" in out, out
    finally:
        with pg_admin(pg.admin_url) as c:
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role])
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_reviewed_matview_is_answered_in_key_order(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the opt-in would hand on unordered: the stored rows are in the e-mail order.
    assert [r[0] for r in pg.admin.execute("SELECT id FROM cust_mv").fetchall()] == [4, 1, 5, 2, 3]
    pg.admin.execute(
        f"GRANT USAGE ON SCHEMA public TO {pg.reader}; GRANT SELECT (id, name) ON customers TO {pg.reader};"
        f" GRANT SELECT ON cust_mv TO {pg.reader}"
    )
    masks = masks_file(tmp_path, "customers.email")
    base = ("sql", "query", "--dsn", pg.reader_url, "--mask", masks)
    code, out = _run(capsys, *base, "SELECT id FROM cust_mv")
    assert code == 2 and "--allow view:public.cust_mv" in out, out  # refused unless reviewed
    allow = ("--allow", "view:public.cust_mv")
    code, out = _run(capsys, *base, *allow, "SELECT string_agg(id::text, ',') AS ids FROM cust_mv")
    assert code == 0, out
    assert "| 1,2,3,4,5 |" in out, out
    code, out = _run(capsys, *base, *allow, "SELECT id, row_number() OVER () AS n FROM cust_mv LIMIT 2")
    assert code == 0, out
    assert "| 1 | 1 |" in out and "| 2 | 2 |" in out, out


def test_a_matview_copying_a_masked_column_stays_refused(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"GRANT USAGE ON SCHEMA public TO {pg.reader}; GRANT SELECT (id, name) ON customers TO {pg.reader};"
        f" GRANT SELECT (id) ON cust_mv_e TO {pg.reader}"
    )
    masks = masks_file(tmp_path, "customers.email")
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--mask", masks, "--allow", "view:public.cust_mv_e",
        "SELECT id FROM cust_mv_e",
    )  # fmt: skip
    assert code == 2, out
    assert "materialized view public.cust_mv_e reads a masked column with its owner's rights" in out, out
    assert SECRET not in out and "| 4 |" not in out
