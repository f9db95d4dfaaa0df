"""PostgreSQL's scan pin holds for what changes while serving (fix session fixd, red team rtd F1).

Calls turned index scans off only when an index over a masked column existed at start-up: one
created while serving (`CREATE INDEX ... (email) INCLUDE (id, name)`) was then scanned in masked
order by every call. Now masked calls always go without index scans, and the re-verification that
runs when the catalog moves reads the CLUSTER flags again: a table CLUSTERed on a masked index
while serving (its heap rewritten in that order) fails the calls until it is undone.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from mcpkit.errors import ToolError
from mcpkit.sql import cli as sqlcli
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import PgScratch, pg_scratch

pytestmark = pytest.mark.postgres

SETUP = """
REVOKE ALL ON SCHEMA public FROM PUBLIC;
CREATE TABLE customers (code text PRIMARY KEY, id int NOT NULL, name text NOT NULL,
  email text NOT NULL, score int NOT NULL, pad text NOT NULL);
INSERT INTO customers SELECT 'customer-code-' || lpad(i::text, 30, '0'), i, 'n' || i, 'e' || i,
  (i * 7919) % 1000, repeat('x', 300) FROM generate_series(1, 1000) i;
VACUUM ANALYZE customers;
GRANT USAGE ON SCHEMA public TO {reader};
GRANT SELECT (code, id, name) ON customers TO {reader}
"""
HEAP = list(range(1, 1001))
SCORE = sorted(HEAP, key=lambda i: ((i * 7919) % 1000, i))


@pytest.fixture(scope="module")
def served(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PgScratch, SqlService]]:
    with pg_scratch(pg_url, "fixdserve") as db:
        for statement in SETUP.format(reader=db.reader).split(";\n"):
            db.admin.execute(statement)
        masks = tmp_path_factory.mktemp("fixdserve") / "masks.yaml"
        masks.write_text("masks:\n  - customers.email\n  - customers.score\n")
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


def _ask(service: SqlService, sql: str = "SELECT count(*) AS n FROM customers") -> str:
    try:
        return str(service.query(sql, call_id="fixd")[0].rows)
    except ToolError as exc:
        return str(exc.code)


def test_an_index_or_a_cluster_made_while_serving_does_not_order_a_call(
    served: tuple[PgScratch, SqlService],
) -> None:
    db, service = served
    assert _ask(service) == "[[1000]]"
    db.admin.execute("CREATE INDEX customers_score ON customers (score) INCLUDE (id, name)")
    db.admin.execute("VACUUM ANALYZE customers")
    with db.admin.cursor() as c:  # unpinned, the planner reads the narrow masked index
        assert list(c.execute("SELECT array_agg(id) FROM customers").fetchone()[0]) == SCORE
    guard = service.engine.guard
    assert guard is not None
    # a served call's transaction, as the reader (the re-verification left for the call below)
    with guard.paused(), service.engine.session(10.0, "t") as (conn, _):
        assert list(conn.exec_driver_sql("SELECT array_agg(id) FROM customers").scalar_one()) == HEAP
    # CLUSTER rewrites the heap in the masked order: the re-verification (the catalog moved) refuses
    db.admin.execute("CLUSTER customers USING customers_score")
    assert _ask(service) == "SOURCE_UNVERIFIED"
