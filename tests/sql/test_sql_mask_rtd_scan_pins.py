"""PostgreSQL's scan pin inside stored SQL (fix session fixd, beside red team rtd).

Calls over a masked table turn index scans off in their transaction (`set_config(..., true)`), so
a masked index does not order a read. Views and functions carry no hint; these tests show they are
planned under the call's settings all the same (a view is expanded into the query; a SQL function
and a PL/pgSQL one plan their statements in the call's transaction; a SECURITY DEFINER function
reading a masked table is refused at start-up anyway), and that the
one way stored SQL had around it, a function's own `SET enable_indexonlyscan = on` (or a cost that
makes the disabled index scan the cheapest path), is refused at start-up: before, `SELECT ... FROM
h()` read `customers` along the masked `customers_score` inside a masked call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.scanpins import enforce_scan_pins
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import PgScratch, masked_service, masks_file, pg_scratch

pytestmark = pytest.mark.postgres

SETUP = """
REVOKE ALL ON SCHEMA public FROM PUBLIC;
CREATE TABLE customers (code text PRIMARY KEY, id int NOT NULL, name text NOT NULL,
  email text NOT NULL, score int NOT NULL, pad text NOT NULL);
INSERT INTO customers SELECT 'customer-code-' || lpad(i::text, 30, '0'), i, 'n' || i, 'e' || i,
  (i * 7919) % 1000, repeat('x', 300) FROM generate_series(1, 1000) i;
CREATE INDEX customers_score ON customers (score) INCLUDE (id, name);
VACUUM ANALYZE customers;
CREATE VIEW v AS SELECT id, name FROM customers;
CREATE FUNCTION f() RETURNS SETOF int LANGUAGE sql STABLE AS $$ SELECT id FROM customers $$;
CREATE FUNCTION p() RETURNS SETOF int LANGUAGE plpgsql STABLE
  AS $$ BEGIN RETURN QUERY SELECT id FROM customers; END $$;
GRANT USAGE ON SCHEMA public TO {reader};
GRANT SELECT (code, id, name) ON customers TO {reader};
GRANT SELECT ON v TO {reader}
"""
HEAP = list(range(1, 1001))  # written in id order
SCORE = sorted(HEAP, key=lambda i: ((i * 7919) % 1000, i))
_PINS = "SELECT set_config('enable_indexscan', 'off', true), set_config('enable_indexonlyscan', 'off', true)"
READS = {
    "view": "SELECT array_agg(id) FROM v",
    "sql function": "SELECT array_agg(x) FROM f() AS x",
    "plpgsql function": "SELECT array_agg(x) FROM p() AS x",
}


def _serve(url: str, folder: Path, allow: tuple[str, ...] = ()) -> SqlService:
    """What `serve --mask` does at start-up: SqlConfigError when refused (`p`'s body is PL/pgSQL,
    which the stored-order check cannot read: opted in)."""
    rules = masks_file(folder, "customers.email", "customers.score")
    return masked_service(url, rules, ("function-order:public.p", *allow))


@pytest.fixture(scope="module")
def pg(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PgScratch, SqlService]]:
    with pg_scratch(pg_url, "fixdpins") as db:
        for statement in SETUP.format(reader=db.reader).split(";\n"):
            db.admin.execute(statement)
        service = _serve(db.reader_url, tmp_path_factory.mktemp("fixdpins"))
        try:
            yield db, service
        finally:
            service.engine.close()


def _read(service: SqlService, sql: str) -> list[int]:
    """`sql`'s one value, read in a served call's transaction (its settings, as the reader)."""
    with service.engine.session(10.0, "t") as (conn, _):
        return list(conn.exec_driver_sql(sql).scalar_one())


def test_views_and_functions_read_under_the_calls_pins(pg: tuple[PgScratch, SqlService]) -> None:
    db, service = pg
    with db.admin.cursor() as c:  # unpinned, every route reads along the masked index
        for name, sql in READS.items():
            assert list(c.execute(sql).fetchone()[0]) == SCORE, name
    for name, sql in READS.items():
        assert _read(service, sql) == HEAP, name


# a function's own SET clause -> the rows it reads: no index scan allowed in the second, but every
# other path costs more, so the planner takes the masked index anyway
CLAUSES = {
    "h1": ("SET enable_indexscan = on SET enable_indexonlyscan = on", 1000),
    "h2": ("SET enable_seqscan = off SET enable_bitmapscan = off SET random_page_cost = 0.01", 300),
}


def test_a_function_that_reopens_index_scans_is_refused(pg: tuple[PgScratch, SqlService]) -> None:
    """Before: served, and `hN()` read `customers` in the masked score's order inside a call. The
    start-up check (`ordered_schema` runs it) is run alone here: the whole start-up takes seconds."""
    db, service = pg
    masking = service.masking
    assert masking is not None

    def start(*allow: str) -> None:
        enforce_scan_pins(service.engine, masking.schema, dict(masking.masked), allow)

    for name, (sets, below) in CLAUSES.items():
        db.admin.execute(
            f"CREATE FUNCTION {name}() RETURNS SETOF int LANGUAGE sql STABLE {sets}"
            f" AS $$ SELECT id FROM customers WHERE score < {below} $$"
        )
    try:
        with db.admin.cursor() as c:  # what the clause does inside a pinned call (as the admin)
            for name, (_, below) in CLAUSES.items():
                c.execute("BEGIN")
                c.execute(_PINS)
                got = list(c.execute(f"SELECT array_agg(x) FROM {name}() AS x").fetchone()[0])
                c.execute("ROLLBACK")
                assert got == [i for i in SCORE if (i * 7919) % 1000 < below], name
        with pytest.raises(SqlConfigError) as refused:
            start()
        for name in CLAUSES:
            assert f"function public.{name}() sets " in str(refused.value)
            assert f"function-config:public.{name}" in str(refused.value)
        start(*(f"function-config:public.{n}" for n in CLAUSES))
        for name in CLAUSES:  # one the reader cannot run is left alone
            db.admin.execute(f"REVOKE EXECUTE ON FUNCTION {name}() FROM PUBLIC")
        start()
    finally:
        for name in CLAUSES:
            db.admin.execute(f"DROP FUNCTION {name}()")


def test_a_function_that_reopens_index_scans_is_refused_with_no_masked_index_yet(
    pg: tuple[PgScratch, SqlService],
) -> None:
    """review R7: the check ran only when an index read a masked column at start-up; calls go without
    index scans whatever the indexes (one may be created while serving), so it runs for any masked table."""
    db, service = pg
    masking = service.masking
    assert masking is not None
    only_email = {key: frozenset({"email"}) for key in masking.masked}  # no index reads the e-mail
    db.admin.execute(
        "CREATE FUNCTION h3() RETURNS SETOF int LANGUAGE sql STABLE SET enable_indexscan = on"
        " AS $$ SELECT id FROM customers $$"
    )
    try:
        with pytest.raises(SqlConfigError) as refused:
            enforce_scan_pins(service.engine, masking.schema, only_email, ())
        assert "function public.h3() sets " in str(refused.value)
    finally:
        db.admin.execute("DROP FUNCTION h3()")


def test_a_role_default_turning_the_other_scans_off_does_not_reopen_a_masked_index(
    pg: tuple[PgScratch, SqlService],
) -> None:
    """Before: `ALTER ROLE ... SET enable_seqscan = off` (and bitmap scans, a low page cost) left
    every path disabled alike, and the planner took the masked partial index as the cheapest."""
    db, service = pg
    db.admin.execute("CREATE INDEX customers_part ON customers (score) WHERE id > 0")
    settings = "enable_seqscan = off", "enable_bitmapscan = off", "random_page_cost = 0.01"
    for setting in settings:
        db.admin.execute(f"ALTER ROLE {db.reader} IN DATABASE {db.db} SET {setting}")
    service.engine.sa_engine.dispose()  # new connections take the role's defaults
    try:
        assert _read(service, "SELECT array_agg(id) FROM customers WHERE id > 0") == HEAP
    finally:
        db.admin.execute(f"ALTER ROLE {db.reader} IN DATABASE {db.db} RESET ALL")
        db.admin.execute("DROP INDEX customers_part")
        service.engine.sa_engine.dispose()
