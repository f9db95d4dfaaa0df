"""A masked column's value kept in PostgreSQL's catalog: `pg_attribute.attmissingval`.

`ALTER TABLE ... ADD COLUMN email text DEFAULT '...'` over existing rows writes none of them: the
value is stored once in `pg_attribute`, which every login may read, column grants or not. Start-up
and doctor refuse it with `VACUUM FULL` as the fix, and `mcpkit sql grant --mask` prints that first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.cli import main
from tests.sql.sql_support import PgScratch, pg_scratch

SECRET = "shared-key@secret.example"
_MISSING = (
    "SELECT attmissingval::text FROM pg_catalog.pg_attribute"
    " WHERE attrelid = 'public.customers'::regclass AND attname = 'email'"
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["sql", *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def _plain(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def pg(pg_url: str, tmp_path: Path) -> Iterator[PgScratch]:
    """customers.email added with a default over existing rows, then set on every row (and VACUUM)."""
    with pg_scratch(pg_url, "attmiss") as db:
        db.admin.execute(
            f"""
            CREATE TABLE customers (id int PRIMARY KEY, name text);
            INSERT INTO customers SELECT g, 'n' || g FROM generate_series(1, 50) g;
            ALTER TABLE customers ADD COLUMN email text DEFAULT '{SECRET}';
            UPDATE customers SET email = 'c' || id || '@example.org';
            CREATE TABLE orders (id int, email text DEFAULT 'plain-default@example.org');
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            GRANT SELECT (id) ON orders TO {db.reader};
            """
        )
        db.admin.execute("VACUUM customers")
        (tmp_path / "masks.yaml").write_text("masks:\n  - customers.email\n  - orders.email\n")
        yield db


@pytest.mark.postgres
def test_postgres_a_masked_value_in_attmissingval_refuses_start_up_until_vacuum_full(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    masks = str(tmp_path / "masks.yaml")
    # Outside mcpkit the reader login reads the value its column grants withhold; the UPDATE of
    # every row and VACUUM did not clear it.
    with psycopg.connect(_plain(pg.reader_url)) as c:
        assert c.execute(_MISSING).fetchone() == (f"{{{SECRET}}}",)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT email FROM customers")
    code, out = _run(capsys, "query", "--dsn", pg.reader_url, "--mask", masks, "SELECT id FROM customers")
    assert code == 2, out
    assert "pg_attribute.attmissingval of public.customers" in out, out
    assert "VACUUM FULL public.customers" in out, out
    assert "orders" not in out, out  # a default alone is in pg_attrdef, not a row's value
    assert SECRET not in out
    code, out = _run(capsys, "doctor", "--dsn", pg.reader_url, "--mask", masks)
    assert "VACUUM FULL public.customers" in out, out
    assert SECRET not in out

    pg.admin.execute("VACUUM FULL customers")
    with psycopg.connect(_plain(pg.reader_url)) as c:
        assert c.execute(_MISSING).fetchone() == (None,)
    code, out = _run(
        capsys, "query", "--dsn", pg.reader_url, "--mask", masks, "SELECT count(*) FROM customers"
    )
    assert code == 0, out
    assert "| 50 |" in out, out
    # Through mcpkit the catalog was never the way: with masks on, admission refuses pg_attribute.
    code, out = _run(capsys, "query", "--dsn", pg.reader_url, "--mask", masks, _MISSING)
    assert code == 3, out


@pytest.mark.postgres
def test_postgres_grant_mask_prints_vacuum_full_first(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    role = f"{pg.reader}_g"
    masks = str(tmp_path / "masks.yaml")
    try:
        code, out = _run(
            capsys,
            "grant",
            "--dsn",
            pg.admin_url,
            "--role",
            role,
            "--tables",
            "customers,orders",
            "--mask",
            masks,
        )
        assert code == 0, out
        statements = [line.rstrip(";") for line in out.splitlines() if line and not line.startswith("--")]
        assert statements[0] == "VACUUM FULL public.customers", out
        assert not any("VACUUM" in s for s in statements[1:]), out
        assert not any("ON public.orders" in s and "email" in s for s in statements), out
        for statement in statements:
            pg.admin.execute(statement)  # type: ignore[arg-type]
        password = out.split("PASSWORD '")[1].split("'")[0]
        url = make_url(pg.reader_url).set(username=role, password=password).render_as_string(False)
        code, out = _run(capsys, "query", "--dsn", url, "--mask", masks, "SELECT count(*) FROM customers")
        assert code == 0, out
    finally:
        found = pg.admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if found:
            pg.admin.execute(f"DROP OWNED BY {role}")  # type: ignore[arg-type]
            pg.admin.execute(f"DROP ROLE {role}")  # type: ignore[arg-type]
