"""A foreign key to a masked column copies its values: the referencing column is masked too.

`orders.customer_email REFERENCES customers(email)` stores the e-mail itself. Start-up masks it
like the column it references (logged as derived), so SQLite's authorizer withholds it and the
analysis answers it `<masked>`; on PostgreSQL and MariaDB an account that can read it is refused,
naming the column and the statements that withhold it.
"""

from __future__ import annotations

import secrets as tokens
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mcpkit.sql.assemble import derive_masks, enforce_masks
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking import MASKED, KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import apply_grant, mcpkit_here, mysql_admin, pg_admin

MASKS = ["customers.email"]
TABLES = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(20), email VARCHAR(40) UNIQUE)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY,"
    " customer_email VARCHAR(40) UNIQUE REFERENCES customers (email))",
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, order_email VARCHAR(40) REFERENCES orders (customer_email))",
)
ROWS = (
    "INSERT INTO customers VALUES (1, 'Ann', 'ann@secret.example')",
    "INSERT INTO orders VALUES (7, 'ann@secret.example')",
)


def _served(url: str) -> SqlService:
    engine = SqlEngine(url)
    policy = MaskPolicy.of(MASKS)
    mapping = reflect_schema(engine.sa_engine, policy=policy)
    policy, masked = derive_masks(engine, policy, policy.masked_tables(mapping))
    try:
        enforce_masks(engine, masked)
    except SqlConfigError:
        engine.close()
        raise
    return SqlService(
        engine, max_rows=10, timeout_s=10.0, masking=Masking(policy, KnownSchema(mapping, "sqlite"))
    )


def test_sqlite_masks_the_copy(tmp_path: Path) -> None:
    path = tmp_path / f"mk_order_{tokens.token_hex(4)}.db"
    with sqlite3.connect(path) as db:
        for sql in TABLES[:2]:
            db.execute(sql)
        for sql in ROWS:
            db.execute(sql)
    db.close()
    service = _served(f"sqlite:///{path}")
    try:
        result, _ = service.query("SELECT id, customer_email FROM orders", call_id="t", max_rows=10)
        assert result.rows == [[7, MASKED]]
        masked = service.masking.policy.masked_columns(None, "orders", ["id", "customer_email"])  # type: ignore[union-attr]
        assert masked == frozenset({"customer_email"})
    finally:
        service.engine.close()  # type: ignore[attr-defined]


@pytest.mark.postgres
def test_postgres_refuses_an_account_that_reads_the_copy(pg_url: str) -> None:
    tag = tokens.token_hex(4)
    db, reader = f"mk_order_{tag}", f"mk_order_{tag}_r"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
        c.execute(f"CREATE ROLE {reader} LOGIN")
    try:
        admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
        with pg_admin(admin) as c:
            for sql in (*TABLES, *ROWS):
                c.execute(sql)
            c.execute(f"GRANT SELECT (id, name) ON customers TO {reader}")
            c.execute(f"GRANT SELECT ON orders, notes TO {reader}")
        url = make_url(admin).set(username=reader, password=None).render_as_string(False)
        with pytest.raises(SqlConfigError) as info:
            _served(url)
        assert "orders" in str(info.value) and "customer_email" in str(info.value)
        assert "notes" in str(info.value)  # a copy of the copy
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


@pytest.mark.postgres
def test_postgres_grant_withholds_a_copy_in_another_schema(pg_url: str, tmp_path: Path) -> None:
    # `grant --mask` and start-up share one knowledge of copies: what grant writes, serve accepts.
    tag = tokens.token_hex(4)
    db, reader, other = f"mk_copy_{tag}", f"mk_copy_{tag}_r", f"mk_copy_{tag}_s"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
    try:
        admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
        with pg_admin(admin) as c:
            c.execute(TABLES[0])
            c.execute(f"CREATE SCHEMA {other}")
            c.execute(
                f"CREATE TABLE {other}.orders2 (oid INTEGER PRIMARY KEY,"
                " customer_email VARCHAR(40) REFERENCES public.customers (email), amount INTEGER)"
            )
            c.execute(ROWS[0])
            c.execute(f"INSERT INTO {other}.orders2 VALUES (10, 'ann@secret.example', 5)")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n")
        tables = f"public.customers,{other}.orders2"
        done = mcpkit_here(
            "sql", "grant", "--dsn", admin, "--role", reader, "--tables", tables, "--mask", str(masks)
        )
        assert done.returncode == 0, done.stderr
        assert f'GRANT SELECT ("oid", "amount") ON {other}.orders2' in done.stdout, done.stdout
        url = apply_grant(admin, reader, done.stdout)
        service = _served(url)  # start-up accepts what grant wrote
        try:
            result, _ = service.query("SELECT oid, customer_email FROM orders2", call_id="t", max_rows=10)
            assert result.rows == [[10, MASKED]]
        finally:
            service.engine.close()  # type: ignore[attr-defined]
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


@pytest.mark.mysql
def test_mariadb_refuses_an_account_that_reads_the_copy(mysql_url: str) -> None:
    tag = tokens.token_hex(4)
    db, user = f"mk_order_{tag}", f"mk_order_{tag}_r"
    admin = mysql_admin(mysql_url)
    try:
        with admin.cursor() as c:
            c.execute(f"CREATE DATABASE {db}")
            c.execute(f"USE {db}")
            for sql in (*TABLES, *ROWS):
                c.execute(sql)
            c.execute(f"CREATE USER '{user}'@'%'")
            c.execute(f"GRANT SELECT (id, name) ON {db}.customers TO '{user}'@'%'")
            c.execute(f"GRANT SELECT ON {db}.orders TO '{user}'@'%'")
        url = make_url(mysql_url).set(username=user, password=None, database=db).render_as_string(False)
        with pytest.raises(SqlConfigError) as info:
            _served(url)
        assert "orders" in str(info.value) and "customer_email" in str(info.value)
    finally:
        with admin.cursor() as c:
            c.execute(f"DROP DATABASE IF EXISTS {db}")
            c.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


# red team mask17 F1: generated columns and foreign-key copies were each found from the rules only,
# so a copy of a generated column, or a generated column over a copy, answered the e-mail in clear
CHAIN = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(20), email VARCHAR(40) UNIQUE,"
    " email_lc VARCHAR(40) GENERATED ALWAYS AS (lower(email)) STORED UNIQUE)",
    "CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount INTEGER,"
    " acct_email_lc VARCHAR(40) REFERENCES customers (email_lc))",
    "CREATE TABLE tickets (id INTEGER PRIMARY KEY, acct_email VARCHAR(40) REFERENCES customers (email),"
    " acct_email_up VARCHAR(40) GENERATED ALWAYS AS (upper(acct_email)) STORED)",
    "INSERT INTO customers (id, name, email) VALUES (1, 'Ann', 'ann@secret.example')",
    "INSERT INTO invoices VALUES (7, 5, 'ann@secret.example')",
    "INSERT INTO tickets (id, acct_email) VALUES (9, 'ann@secret.example')",
)


def test_sqlite_masks_copies_of_generated_columns_and_generated_columns_over_copies(tmp_path: Path) -> None:
    path = tmp_path / f"mk_chain_{tokens.token_hex(4)}.db"
    with sqlite3.connect(path) as db:
        for sql in CHAIN:
            db.execute(sql)
    db.close()
    service = _served(f"sqlite:///{path}")
    try:
        invoices, _ = service.query("SELECT * FROM invoices", call_id="t", max_rows=10)
        tickets, _ = service.query("SELECT * FROM tickets", call_id="t", max_rows=10)
        assert invoices.rows == [[7, 5, MASKED]]
        assert tickets.rows == [[9, MASKED, MASKED]]
    finally:
        service.engine.close()  # type: ignore[attr-defined]


@pytest.mark.postgres
def test_postgres_grant_withholds_copies_of_generated_columns_and_generated_columns_over_copies(
    pg_url: str, tmp_path: Path
) -> None:
    tag = tokens.token_hex(4)
    db, reader = f"mk_chain_{tag}", f"mk_chain_{tag}_r"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
    try:
        admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
        with pg_admin(admin) as c:
            for sql in CHAIN:
                c.execute(sql)
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n")
        done = mcpkit_here(
            "sql", "grant", "--dsn", admin, "--role", reader, "--tables", "customers,invoices,tickets",
            "--mask", str(masks),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert 'GRANT SELECT ("id", "amount") ON public.invoices' in done.stdout, done.stdout
        assert 'GRANT SELECT ("id") ON public.tickets' in done.stdout, done.stdout
        url = apply_grant(admin, reader, done.stdout)
        with pg_admin(admin) as c:
            c.execute(f"GRANT SELECT ON invoices TO {reader}")  # the careless way: refused
        with pytest.raises(SqlConfigError) as info:
            _served(url)
        assert "invoices" in str(info.value) and "acct_email_lc" in str(info.value)
        with pg_admin(admin) as c:
            c.execute(f"REVOKE SELECT ON invoices FROM {reader}")
            c.execute(f'GRANT SELECT ("id", "amount") ON invoices TO {reader}')
        service = _served(url)  # start-up accepts what grant wrote
        try:
            tickets, _ = service.query("SELECT id, acct_email_up FROM tickets", call_id="t", max_rows=10)
            assert tickets.rows == [[9, MASKED]]
        finally:
            service.engine.close()  # type: ignore[attr-defined]
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")


@pytest.mark.postgres
def test_postgres_an_inheritance_child_of_a_copy_table_is_masked(pg_url: str, tmp_path: Path) -> None:
    """Red team mask17 F1, inheritance variant: `tickets_old () INHERITS (tickets)` holds the copy
    `acct_email` only by inheritance (PostgreSQL does not inherit the foreign key); grant printed it
    whole and it answered the e-mail while `tickets.acct_email` itself was masked."""
    tag = tokens.token_hex(4)
    db, reader = f"mk_maskfix_inh_{tag}", f"mk_maskfix_inh_{tag}_r"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE DATABASE {db}")
    try:
        admin = make_url(pg_url).set(database=db).render_as_string(hide_password=False)
        with pg_admin(admin) as c:
            for sql in CHAIN:
                c.execute(sql)
            c.execute("CREATE TABLE tickets_old () INHERITS (tickets)")
            c.execute("INSERT INTO tickets_old (id, acct_email) VALUES (10, 'ann@secret.example')")
        masks = tmp_path / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n")
        done = mcpkit_here(
            "sql", "grant", "--dsn", admin, "--role", reader, "--tables", "customers,tickets,tickets_old",
            "--mask", str(masks),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert 'GRANT SELECT ("id") ON public.tickets_old' in done.stdout, done.stdout
        url = apply_grant(admin, reader, done.stdout)
        with pg_admin(admin) as c:
            c.execute(f"GRANT SELECT ON tickets_old TO {reader}")  # the careless way: refused
        with pytest.raises(SqlConfigError) as info:
            _served(url)
        assert "tickets_old" in str(info.value) and "acct_email" in str(info.value)
        with pg_admin(admin) as c:
            c.execute(f"REVOKE SELECT ON tickets_old FROM {reader}")
            c.execute(f'GRANT SELECT ("id") ON tickets_old TO {reader}')
        service = _served(url)
        try:
            for sql in ("SELECT id, acct_email FROM tickets_old", "SELECT * FROM tickets_old"):
                try:
                    answer = repr(service.query(sql, call_id="t", max_rows=10)[0].rows)
                except Exception as exc:  # refused or denied: never the value
                    answer = type(exc).__name__
                assert "secret.example" not in answer.lower(), answer
        finally:
            service.engine.close()  # type: ignore[attr-defined]
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            c.execute(f"DROP ROLE IF EXISTS {reader}")
