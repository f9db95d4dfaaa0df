"""PostgreSQL masked calls go without index scans only where they reach a masked index (pincost).

Before, every masked call turned index scans off (fix session fixd), whatever it read: a top-N by
key over a join became a hash join of every row (~1,000x at the database). Now only a call that
can reach an index over a masked column (on the table, one of its partitions, through a view, or
a user function) does, re-derived when the catalog moves, so an index created while serving turns
it back on before the next answer. Each test reads what a served call sent (`begin_statements`,
recorded as sent) and EXPLAINs the sent SQL on a connection of the test's own, as the reader,
under exactly those statements: the role's own defaults apply there too.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlglot
from sqlalchemy.engine import make_url

from mcpkit.sql import cli as sqlcli
from mcpkit.sql.assemble import equip, open_service
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import READER_CONNECTIONS, UNBOUNDED_MEMORY, PgScratch, pg_admin, pg_scratch

pytestmark = pytest.mark.postgres

SETUP = """
REVOKE ALL ON SCHEMA public FROM PUBLIC;
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, amount int NOT NULL);
INSERT INTO customers SELECT n, 'c' || n, md5(n::text) || '@x.io' FROM generate_series(1, 4000) n;
INSERT INTO orders SELECT n, 1 + (n * 7919) % 4000, (n * 37) % 1000 FROM generate_series(1, 20000) n;
CREATE INDEX orders_customer ON orders (customer_id);
CREATE TABLE events (id int NOT NULL, secret text NOT NULL, kind text NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE events_a PARTITION OF events FOR VALUES FROM (0) TO (1000);
CREATE TABLE events_b PARTITION OF events FOR VALUES FROM (1000) TO (2000);
INSERT INTO events SELECT n, md5(n::text), 'k' || (n % 7) FROM generate_series(0, 1999) n;
CREATE INDEX events_id ON events (id);
VACUUM ANALYZE customers, orders, events;
CREATE VIEW customer_names WITH (security_invoker = on) AS SELECT id, name FROM customers;
CREATE VIEW order_totals WITH (security_invoker = on) AS SELECT customer_id, amount FROM orders;
GRANT USAGE ON SCHEMA public TO {reader};
GRANT SELECT (id, name) ON customers TO {reader};
GRANT SELECT ON orders, customer_names, order_totals TO {reader};
GRANT SELECT (id, kind) ON events, events_a, events_b TO {reader}
"""
TOP_N = (
    "SELECT c.id, count(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.id"
    " GROUP BY c.id ORDER BY c.id LIMIT 10"
)
OFF = "set_config('enable_indexscan', 'off', true)"


@pytest.fixture(scope="module")
def served(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PgScratch, SqlService]]:
    """`serve --mask` as the CLI wires it (re-verification before each call)."""
    with pg_scratch(pg_url, "pincost") as db:
        for statement in SETUP.format(reader=db.reader).split(";\n"):
            db.admin.execute(statement)
        masks = tmp_path_factory.mktemp("pincost") / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - events.secret\n")
        parser = argparse.ArgumentParser()
        sqlcli.register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(
            ["sql", "query", "--dsn", db.reader_url, "--mask", str(masks), "--allow", "unbounded-memory",
             "--catalog-check-interval", "0", "SELECT 1"]
        )  # fmt: skip
        args.allow, args.allow_function = sqlcli.opt_ins(args)
        service = sqlcli._service(args, 1000)
        try:
            yield db, service
        finally:
            service.engine.close()


def _call(db: PgScratch, service: SqlService, sql: str) -> tuple[bool, str]:
    """Serve `sql`; whether its (last) call turned index scans off, and EXPLAIN of what it sent
    under the statements it began with, on a reader's connection of the test's own."""
    profile = service.engine.profile
    began: list[list[str]] = []
    sent: list[str] = []
    original = profile.begin_statements

    def recording(dbapi: object, timeout_s: float, call_id: str) -> list[str]:
        statements = original(dbapi, timeout_s, call_id)
        began.append(statements)
        return statements

    profile.begin_statements = recording  # type: ignore[method-assign]
    try:
        service.query(sql, call_id="pincost", note=lambda **f: sent.extend([f["sql"]] if "sql" in f else []))
    finally:
        del profile.begin_statements
    statements = began[-1]
    url = make_url(db.reader_url)
    with psycopg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, dbname=url.database,
        autocommit=True,
    ) as conn:  # fmt: skip
        for statement in statements:
            conn.execute(statement)
        plan = "\n".join(str(r[0]) for r in conn.execute("EXPLAIN " + sent[-1].replace("%", "%%")))
        conn.execute("ROLLBACK")
    return any(OFF in s for s in statements), plan


def _index_scan(plan: str) -> bool:
    return "Index Scan" in plan.replace("Bitmap Index Scan", "") or "Index Only Scan" in plan


def test_top_n_over_a_join_keeps_its_index_scans_until_an_index_reads_a_masked_column(
    served: tuple[PgScratch, SqlService],
) -> None:
    """Before: index scans off (a hash join of every row). A masked index created while serving
    turns them off before the next answer; dropped, they come back."""
    db, service = served
    off, plan = _call(db, service, TOP_N)
    assert not off and _index_scan(plan), plan
    db.admin.execute("CREATE INDEX customers_email ON customers (lower(email)) INCLUDE (name)")
    try:
        off, plan = _call(db, service, TOP_N)
        assert off and not _index_scan(plan), plan
        off, plan = _call(db, service, "SELECT id, name FROM customer_names ORDER BY id LIMIT 5")
        assert off and not _index_scan(plan), plan  # a view over the masked table
        # a masked read that reaches no masked index (a view over orders alone) keeps them
        off, plan = _call(db, service, "SELECT customer_id FROM order_totals ORDER BY customer_id LIMIT 5")
        assert not off and _index_scan(plan), plan
    finally:
        db.admin.execute("DROP INDEX customers_email")
    off, plan = _call(db, service, TOP_N)
    assert not off and _index_scan(plan), plan


def test_a_partial_index_over_a_masked_column_on_one_partition(served: tuple[PgScratch, SqlService]) -> None:
    db, service = served
    sql = "SELECT id, kind FROM events ORDER BY id LIMIT 5"
    off, plan = _call(db, service, sql)
    assert not off and _index_scan(plan), plan
    db.admin.execute("CREATE INDEX events_b_secret ON events_b (id) WHERE secret > 'm'")
    try:
        off, plan = _call(db, service, sql)
        assert off and not _index_scan(plan), plan
    finally:
        db.admin.execute("DROP INDEX events_b_secret")


def test_a_whole_row_index_reads_the_masked_column(served: tuple[PgScratch, SqlService]) -> None:
    """`(customers)` depends on the table alone (`pg_depend` subid 0), naming no column: before, the
    start-up's index query missed it; a partition's own index depends on its table so too ('S'),
    which is not one (the partition test above)."""
    db, service = served
    db.admin.execute("CREATE INDEX customers_row ON customers ((customers))")
    try:
        off, plan = _call(db, service, TOP_N)
        assert off and not _index_scan(plan), plan
    finally:
        db.admin.execute("DROP INDEX customers_row")


def test_a_role_default_does_not_reopen_a_masked_index(served: tuple[PgScratch, SqlService]) -> None:
    """Every path the role's defaults disable alike (and a cheap random page): the pinned call still
    scans no index; the reader's own connection takes the defaults, as the served one does."""
    db, service = served
    db.admin.execute("CREATE INDEX customers_email_id ON customers (id) INCLUDE (email)")
    for setting in ("enable_seqscan = off", "enable_bitmapscan = off", "random_page_cost = 0.01"):
        db.admin.execute(f"ALTER ROLE {db.reader} IN DATABASE {db.db} SET {setting}")
    service.engine.sa_engine.dispose()
    try:
        off, plan = _call(db, service, "SELECT id, name FROM customers WHERE id > 0 ORDER BY id LIMIT 5")
        assert off and "customers_email_id" not in plan and not _index_scan(plan), plan
    finally:
        db.admin.execute(f"ALTER ROLE {db.reader} IN DATABASE {db.db} RESET ALL")
        db.admin.execute("DROP INDEX customers_email_id")
        service.engine.sa_engine.dispose()


def test_a_user_function_may_reach_a_masked_index(served: tuple[PgScratch, SqlService]) -> None:
    """Its body is not resolved: with a masked index anywhere, a call naming it goes without index
    scans (what the re-verification derives, read here as it does)."""
    from mcpkit.sql.scanpins import enforce_scan_pins, index_scans_allowed  # new: old src fails here

    db, service = served
    masking = service.masking
    assert masking is not None
    known, masked = masking.schema, dict(masking.masked)
    guard = service.engine.guard
    assert guard is not None
    calls = sqlglot.parse_one("SELECT public.first_name() AS f, count(*) AS n FROM orders", read="postgres")
    plain = sqlglot.parse_one("SELECT count(*) AS n FROM orders", read="postgres")
    db.admin.execute(
        "CREATE FUNCTION first_name() RETURNS text LANGUAGE plpgsql STABLE"
        " AS $$ BEGIN RETURN (SELECT name FROM customers ORDER BY id LIMIT 1); END $$"
    )
    try:
        with guard.paused():  # the re-verification would refuse the function (it reads a masked order)
            enforce_scan_pins(service.engine, known, masked, ())
            assert index_scans_allowed(calls, known)  # no masked index: nothing to reach
            db.admin.execute("CREATE INDEX customers_email ON customers (email)")
            enforce_scan_pins(service.engine, known, masked, ())
            assert not index_scans_allowed(calls, known) and index_scans_allowed(plain, known)
    finally:
        db.admin.execute("DROP FUNCTION first_name()")
        db.admin.execute("DROP INDEX IF EXISTS customers_email")
        with guard.paused():
            enforce_scan_pins(service.engine, known, masked, ())


def test_a_relation_whose_name_holds_a_dot_is_reached_by_its_whole_name(
    served: tuple[PgScratch, SqlService],
) -> None:
    """Red team rtM F1: the reach keys are `schema.name`, and the match took the text after the last
    dot, so a view named `hr.directory` over the masked table kept index scans on (`directory` is
    no name the query used), and a binary search over an early stop read the masked order."""
    from mcpkit.sql.scanpins import enforce_scan_pins, index_scans_allowed

    db, service = served
    masking = service.masking
    assert masking is not None
    known, masked = masking.schema, dict(masking.masked)
    guard = service.engine.guard
    assert guard is not None
    dotted = sqlglot.parse_one('SELECT id FROM "hr.directory" ORDER BY id LIMIT 1', read="postgres")
    qualified = sqlglot.parse_one('SELECT id FROM public."hr.directory"', read="postgres")
    db.admin.execute(
        'CREATE VIEW "hr.directory" WITH (security_invoker = on) AS SELECT id, name FROM customers'
    )
    db.admin.execute("CREATE INDEX customers_email ON customers (email)")
    try:
        with guard.paused():
            enforce_scan_pins(service.engine, known, masked, ())
            assert not index_scans_allowed(dotted, known)
            assert not index_scans_allowed(qualified, known)
    finally:
        db.admin.execute('DROP VIEW "hr.directory"')
        db.admin.execute("DROP INDEX IF EXISTS customers_email")
        with guard.paused():
            enforce_scan_pins(service.engine, known, masked, ())


def test_a_masked_index_made_while_roles_serve_pins_their_calls(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under --role-map the calls go through each role's engine, whose re-verification did not read
    the pins (the account's does): the reach is read there too, over the server's masks."""
    with pg_scratch(pg_url, "pincostrm") as db:
        alice = f"{db.reader}_a"
        db.admin.execute(f"CREATE ROLE {alice} LOGIN PASSWORD 'pw' CONNECTION LIMIT {READER_CONNECTIONS}")
        router = None
        try:
            db.admin.execute("CREATE TABLE masked_t (id int PRIMARY KEY, name text, email text)")
            db.admin.execute(
                "INSERT INTO masked_t SELECT i, 'n' || i, 'e' || i FROM generate_series(1, 50) i"
            )
            db.admin.execute(f"GRANT SELECT (id, name) ON masked_t TO {db.reader}, {alice}")
            masks, roles = tmp_path / "masks.yaml", tmp_path / "roles.yaml"
            masks.write_text("masks:\n  - masked_t.email\n", encoding="utf-8")
            roles.write_text(
                f"principals:\n  alice: {alice}\nlogins:\n  {alice}: {{user: PC_USER, password: PC_PW}}\n",
                encoding="utf-8",
            )
            monkeypatch.setenv("PC_USER", alice)
            monkeypatch.setenv("PC_PW", "pw")
            parser = argparse.ArgumentParser()
            sqlcli.register(parser.add_subparsers(dest="command"))
            args = parser.parse_args(
                ["sql", "serve", "--dsn", db.reader_url, "--mask", str(masks), "--role-map", str(roles),
                 *UNBOUNDED_MEMORY, "--catalog-check-interval", "0"]
            )  # fmt: skip
            args.allow, args.allow_function = sqlcli.opt_ins(args)
            service = open_service(db.reader_url, args, 100, mapped=frozenset({alice}))
            router = equip(args, service, str(masks), str(roles))
            assert router is not None
            calls = router.service_for("alice")
            began: list[list[str]] = []
            profile = calls.engine.profile
            original = profile.begin_statements

            def recording(dbapi: object, timeout_s: float, call_id: str) -> list[str]:
                began.append(original(dbapi, timeout_s, call_id))
                return began[-1]

            profile.begin_statements = recording  # type: ignore[method-assign]
            sql = "SELECT id, name FROM public.masked_t ORDER BY id LIMIT 3"
            calls.query(sql, call_id="pc")
            assert not any(OFF in s for s in began[-1])  # no masked index yet
            db.admin.execute("CREATE INDEX masked_t_email ON masked_t (email)")
            calls.query(sql, call_id="pc")
            assert any(OFF in s for s in began[-1])  # the answer came from a pinned call
        finally:
            if router is not None:
                router.close()
            db.admin.execute("DROP TABLE IF EXISTS masked_t")
            with pg_admin(pg_url) as c:  # this test's own login: its pooled sessions go first
                c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [alice]
                )
                c.execute(f"DROP ROLE IF EXISTS {alice}")
