"""An opt-in binds every function it reaches to the body start-up saw (red team v1 F2, F4, F5).

Start-up accepts a SQL function whose body it cannot verify through `--allow function:`; a
`view-order:` opt-in on an owner-rights view calling it (F2), a `function-order:` opt-in on an
aggregate whose state function it is (F4) or on a function calling it (F5) then kept only the
view's text or the accepted function's own row. The callee swapped while serving for a
`set_config` counter (`CREATE OR REPLACE`, same OID) passed re-verification, ran per row and
numbered the customers in the masked e-mail order. Now every function a function opt-in accepts
is digested, an aggregate with its support functions, and a swap fails the re-verification.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.maskcheck import order_check, ordered_schema, prepare_masks
from mcpkit.sql.masking import MaskPolicy
from tests.sql.sql_support import PgScratch, masks_file, pg_customers, pg_scratch

COUNTER = (
    "SELECT set_config('rtv1.n', (coalesce(nullif(current_setting('rtv1.n', true), ''), '0')"
    "::int + 1)::text, true)::int"
)
MASKED = {"customers": frozenset({"email"})}
ALLOW = [
    *("function:public.helper", "view:public.v_helper", "view-order:public.v_helper"),
    *("function:public.agg_sf", "function:public.agg_sf2", "function:public.my_total"),
    *("function-order:public.my_total", "function:public.f", "function:public.g", "function-order:public.f"),
    "clustered-order:customers",  # `pg_customers` CLUSTERs on the masked e-mail index
]


@pytest.fixture(scope="module")
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rtv1opt") as db:
        pg_customers(db)
        db.admin.execute(
            f"""
            CREATE FUNCTION public.helper(x int) RETURNS int LANGUAGE sql IMMUTABLE AS 'select x + 1';
            CREATE VIEW public.v_helper AS SELECT id, name, public.helper(id) AS h FROM customers;
            GRANT SELECT ON public.v_helper TO {db.reader};
            CREATE FUNCTION public.agg_sf(s int, x int) RETURNS int LANGUAGE sql IMMUTABLE
              AS 'select coalesce(s, 0) + x';
            CREATE FUNCTION public.agg_sf2(s int, x int) RETURNS int LANGUAGE sql IMMUTABLE
              AS 'select coalesce(s, 0) + x';
            CREATE AGGREGATE public.my_total(int) (sfunc = public.agg_sf, stype = int);
            CREATE FUNCTION public.g(x int) RETURNS int LANGUAGE sql IMMUTABLE AS 'select x + 1';
            CREATE FUNCTION public.f(x int) RETURNS int LANGUAGE sql IMMUTABLE AS 'select public.g(x)';
            """
        )
        yield db


def _replaced(pg: PgScratch, tmp_path: Path, swap: str, undo: str, what: str) -> None:
    """Start up with `ALLOW`, verify, run `swap` as the owner: the re-verification names `what`."""
    engine = SqlEngine(pg.reader_url)
    try:
        engine.profile.use_function_policy(
            FunctionPolicy.for_dialect("postgres", extra=["helper", "my_total", "f"])
        )
        policy, reflection, masked = prepare_masks(engine, masks_file(tmp_path, "customers.email"))
        known = ordered_schema(engine, reflection, policy, masked, ALLOW)
        verify = order_check(MaskPolicy.of(["customers.email"]), known, MASKED, ALLOW)
        with engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # nothing changed
        pg.admin.execute(swap)
        replaced = f"{what}, accepted by its --allow opt-in, was replaced"
        with pytest.raises(SqlConfigError, match=replaced), engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # before: passed, and the counter ran per row
    finally:
        engine.close()
        pg.admin.execute(undo)


def _body(name: str, args: str, body: str) -> str:
    head = f"CREATE OR REPLACE FUNCTION public.{name}({args}) RETURNS int LANGUAGE sql IMMUTABLE"
    return f"{head} AS $${body}$$"


@pytest.mark.postgres
def test_a_function_a_view_order_view_calls_is_bound_to_its_body(pg: PgScratch, tmp_path: Path) -> None:
    # F2: `select id, h from v_helper` answered each id's e-mail rank after the swap
    swap, undo = _body("helper", "x int", COUNTER), _body("helper", "x int", "select x + 1")
    _replaced(pg, tmp_path, swap, undo, r"function public\.helper\(x integer\)")


@pytest.mark.postgres
def test_an_aggregate_state_function_is_bound_to_its_body(pg: PgScratch, tmp_path: Path) -> None:
    # F4: the sum became the last digits of the ids in e-mail order
    swap = _body("agg_sf", "s int, x int", "select coalesce(s, 0) * 10 + x % 10")
    undo = _body("agg_sf", "s int, x int", "select coalesce(s, 0) + x")
    _replaced(pg, tmp_path, swap, undo, r"function public\.agg_sf\(s integer, x integer\)")


@pytest.mark.postgres
def test_an_aggregate_given_another_state_function_is_replaced(pg: PgScratch, tmp_path: Path) -> None:
    # `CREATE OR REPLACE AGGREGATE` keeps the aggregate's OID and its pg_proc row
    swap = "CREATE OR REPLACE AGGREGATE public.my_total(int) (sfunc = public.agg_sf2, stype = int)"
    undo = "CREATE OR REPLACE AGGREGATE public.my_total(int) (sfunc = public.agg_sf, stype = int)"
    _replaced(pg, tmp_path, swap, undo, r"function public\.my_total\(integer\)")


@pytest.mark.postgres
def test_a_callee_of_a_function_order_function_is_bound_to_its_body(pg: PgScratch, tmp_path: Path) -> None:
    # F5: `f(id) = k` answered the id at scan position k
    swap, undo = _body("g", "x int", COUNTER), _body("g", "x int", "select x + 1")
    _replaced(pg, tmp_path, swap, undo, r"function public\.g\(x integer\)")


@pytest.mark.postgres
def test_the_digests_are_read_whatever_operators_the_path_holds(pg: PgScratch) -> None:
    # a user `>=(oid, integer)` answering false emptied the digests; a user `format(text, name, name,
    # text)` renamed every signature (an exact match beats pg_catalog's coercing one)
    pg.admin.execute(
        "CREATE FUNCTION public.nope(oid, integer) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'select false';"
        " CREATE OPERATOR public.>= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.nope);"
        " CREATE FUNCTION public.format(text, name, name, text) RETURNS text LANGUAGE sql IMMUTABLE"
        " AS 'select ''x'''"
    )
    engine = SqlEngine(pg.reader_url)
    try:
        with engine.session(30.0, "test") as (conn, _):
            bodies = engine.profile.accepted_bodies(conn, ALLOW)
    finally:
        engine.close()
        pg.admin.execute(
            "DROP OPERATOR public.>= (oid, integer); DROP FUNCTION public.nope(oid, integer);"
            " DROP FUNCTION public.format(text, name, name, text)"
        )
    assert {"function public.f(x integer)", "function public.g(x integer)"} <= set(bodies), bodies
