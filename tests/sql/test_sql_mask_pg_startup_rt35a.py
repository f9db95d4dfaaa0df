"""PostgreSQL start-up and re-verification under masks (red team rt35a F1, F2, F3, F6, F7, L1).

- F1: a superuser's function placed in pg_catalog whose body reads pg_class was no catalog finding.
- F2: earthdistance (a reviewed extension) in a schema of its own: its SQL bodies call `earth()`
  unqualified, so a user `public.earth()` counter ran once per row through `ext.sec_to_gc`, called
  directly or through an invoker view, and numbered the customers in the masked e-mail order.
- F3: a user (extension) type's input function, run per row by `CAST(x AS t)`, was not reached.
- F6: an invoker view (or materialized view, or policy) over pg_class was no catalog finding.
- F7: a body replaced while serving kept its `function-order:` opt-in (re-verification passed).
- L1: `function-order:S.F(argtypes)`, what start-up asks for per overload, was never matched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission import FunctionPolicy
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.maskcheck import order_check, ordered_schema, prepare_masks
from mcpkit.sql.masking import KnownSchema, MaskPolicy
from mcpkit.sql.profiles.catalog_reads import catalog_findings
from mcpkit.sql.profiles.stored import stored_queries
from tests.helpers import UNBOUNDED_MEMORY
from tests.sql.sql_support import PgScratch, masks_file, pg_customers, pg_need_extensions, pg_scratch, run_cli

COUNTER = (
    "SELECT set_config('pgstart.c', (coalesce(nullif(current_setting('pgstart.c', true), ''), '0')"
    "::int + 1)::text, false)::float8"
)
PER_ROW = "functions whose value changes from row to row in the order rows are read"
MASKED = {"customers": frozenset({"email"})}


@pytest.fixture(scope="module")
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "pgstart") as db:
        pg_need_extensions(db.admin, "cube", "earthdistance", "citext")
        pg_customers(db)
        db.admin.execute(
            f"""
            CREATE SCHEMA ext;
            GRANT USAGE ON SCHEMA ext TO {db.reader};
            CREATE EXTENSION cube SCHEMA ext;
            CREATE EXTENSION earthdistance SCHEMA ext;
            CREATE EXTENSION citext SCHEMA ext;
            CREATE FUNCTION public.earth() RETURNS float8 LANGUAGE sql STABLE AS $$ {COUNTER} $$;
            CREATE FUNCTION pg_catalog.pgstart_estimate(text) RETURNS real LANGUAGE sql STABLE
              AS $$ SELECT reltuples FROM pg_class WHERE relname = $1 $$;
            CREATE VIEW public.v_cat WITH (security_invoker = on) AS
              SELECT relname, reltuples FROM pg_class WHERE relnamespace = 2200;
            CREATE VIEW public.v_over WITH (security_invoker = on) AS SELECT relname FROM public.v_cat;
            CREATE MATERIALIZED VIEW public.m_cat AS SELECT table_name FROM information_schema.tables;
            CREATE VIEW public.v_dist WITH (security_invoker = on) AS
              SELECT id, name, ext.sec_to_gc(id * 0 + 1e9) AS arc FROM customers;
            CREATE TABLE public.items (id int PRIMARY KEY);
            CREATE POLICY p_cat ON public.items USING (id < (SELECT count(*) FROM pg_class));
            CREATE FUNCTION public.fmt(x integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN x + 1;
            CREATE FUNCTION public.fmt(x numeric) RETURNS numeric LANGUAGE sql IMMUTABLE RETURN x + 1;
            GRANT SELECT ON public.v_cat, public.v_over, public.m_cat, public.v_dist TO {db.reader};
            GRANT SELECT ON public.items TO {db.reader};
            GRANT EXECUTE ON FUNCTION public.earth() TO {db.reader};
            """
        )
        yield db


@pytest.fixture(scope="module")
def engine(pg: PgScratch) -> Iterator[SqlEngine]:
    eng = SqlEngine(pg.reader_url)
    try:
        yield eng
    finally:
        eng.close()


def _catalog_lines(engine: SqlEngine) -> list[str]:
    with engine.session(30.0, "test") as (conn, _):
        return [f"{f.message} [{f.opt_in}]" for f in catalog_findings(engine.profile, conn)]


@pytest.mark.postgres
def test_a_function_in_pg_catalog_reading_pg_class_is_a_catalog_finding(engine: SqlEngine) -> None:
    lines = _catalog_lines(engine)
    want = "function pg_catalog.pgstart_estimate it reads the database's catalog (pg_class)"
    assert any(line.startswith(want) for line in lines), lines  # before: no finding (F1)


@pytest.mark.postgres
def test_views_and_policies_reading_the_catalog_are_catalog_findings(engine: SqlEngine) -> None:
    lines = _catalog_lines(engine)
    for want in (
        "view public.v_cat reads the database's catalog (pg_catalog.pg_class)",
        "view public.v_over reads the database's catalog (pg_catalog.pg_class)",
        "materialized view public.m_cat reads the database's catalog (information_schema.tables)",
        "policy public.items.p_cat reads the database's catalog (pg_catalog.pg_class)",
    ):
        assert any(line.startswith(want) for line in lines), (want, lines)  # before: none (F6)
    assert any(line.endswith("[view-order:public.v_cat]") for line in lines), lines
    assert any(line.endswith("[policy-order:public.items.p_cat]") for line in lines), lines
    assert not any("v_dist" in line or "citext" in line for line in lines), lines


# The opt-ins of the fixture's other objects (each test keeps to its own finding).
OTHERS = [
    *("function:public.earth", "function-order:public.earth", "view-order:public.v_cat"),
    *("view-order:public.v_over", "view-order:public.m_cat", "policy-order:public.items.p_cat"),
    *("function-order:pg_catalog.pgstart_estimate", "view:public.m_cat", "view-order:public.v_dist"),
    "function:pg_catalog.pgstart_estimate",
    "clustered-order:customers",  # `pg_customers` CLUSTERs on the masked e-mail index
]


def _args(pg: PgScratch, tmp_path: Path, *allow: str, but: str = "") -> list[str]:
    base = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks_file(tmp_path, "customers.email")]
    return base + [a for v in (*OTHERS, *allow) if v != but for a in ("--allow", v)] + [*UNBOUNDED_MEMORY]


@pytest.mark.postgres
def test_an_extension_sql_body_calling_by_unqualified_name_counts_per_row(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _args(pg, tmp_path, "function:ext.sec_to_gc")
    query = "SELECT id, round(ext.sec_to_gc(id * 0 + 1e9) / (2 * pi())) AS pos FROM customers ORDER BY id"
    code, out = run_cli(capsys, *base, "--allow-function", "ext.sec_to_gc", query)
    assert code == 3 and PER_ROW in out, out  # before: pos 3, 7, 9, 1, 5: the e-mail ranking


@pytest.mark.postgres
def test_an_invoker_view_over_such_a_member_and_a_shadowing_user_function_are_refused(
    engine: SqlEngine,
) -> None:
    with engine.session(30.0, "test") as (conn, _):
        per_row = engine.profile.row_order_routines(conn)
        stored = {(q.schema, q.name): q for q in stored_queries(engine.profile, conn, MASKED)}
    # The invoker view's call is a per-row one now (before: start-up passed it, sec_to_gc exempt).
    assert "sec_to_gc" in stored[("public", "v_dist")].volatile
    # A user function named like a callee it calls unqualified runs per row through it.
    assert "a call by name in the body of ext." in (stored[("public", "earth")].hidden or "")
    # `earth()` calls nothing, and citext's members qualify every call: still reviewed.
    assert ("ext", "earth") not in per_row and ("ext", "replace") not in per_row, per_row
    assert ("ext", "sec_to_gc") in per_row, per_row


@pytest.mark.postgres
def test_a_user_type_input_function_is_reached(pg: PgScratch) -> None:
    pg_need_extensions(pg.admin, "seg")
    pg.admin.execute("CREATE EXTENSION seg SCHEMA ext")  # not reviewed: every member counts
    engine = SqlEngine(pg.reader_url)
    try:
        with engine.session(30.0, "test") as (conn, _):
            found = {(q.schema, q.name): q.hidden or "" for q in stored_queries(engine.profile, conn, MASKED)}
    finally:
        engine.close()
        pg.admin.execute("DROP EXTENSION seg")
    assert "the input/output of type ext.seg" in found.get(("ext", "seg_in"), ""), found  # before: absent


@pytest.mark.postgres
def test_function_order_by_signature_accepts_each_overload(
    pg: PgScratch, engine: SqlEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sigs = ["public.fmt(integer)", "public.fmt(numeric)"]
    allow = [f"{k}:{s}" for s in sigs for k in ("function", "function-order")]
    query = "SELECT id, public.fmt(id) AS a FROM customers ORDER BY id"
    code, out = run_cli(capsys, *_args(pg, tmp_path, *allow), "--allow-function", "fmt", query)
    assert code == 0 and "| 1 | 2 |" in out, out  # before: refused as a per-row function (L1)
    from mcpkit.sql.profiles.stored import order_accepted

    with engine.session(30.0, "test") as (conn, _):
        one = order_accepted(engine.profile, conn, ["function-order:public.fmt(integer)"])
        both = order_accepted(engine.profile, conn, allow)
    assert ("public", "fmt") not in one and ("public", "fmt") in both  # the name: when each overload is


def _started(engine: SqlEngine, allow: list[str], tmp_path: Path) -> KnownSchema:
    """The schema calls are analysed against, as start-up builds it (`maskcheck.ordered_schema`)."""
    policy, reflection, masked = prepare_masks(engine, masks_file(tmp_path, "customers.email"))
    return ordered_schema(engine, reflection, policy, masked, allow)


@pytest.mark.postgres
def test_a_body_replaced_while_serving_voids_its_function_order_opt_in(pg: PgScratch, tmp_path: Path) -> None:
    pg.admin.execute(
        "CREATE FUNCTION public.once(x integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN x + 1"
    )
    engine = SqlEngine(pg.reader_url)
    try:
        engine.profile.use_function_policy(FunctionPolicy.for_dialect("postgres", extra=["once"]))
        allow = ["function-order:public.once", *OTHERS]
        known = _started(engine, allow, tmp_path)
        verify = order_check(MaskPolicy.of(["customers.email"]), known, MASKED, allow)
        with engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # nothing changed
        pg.admin.execute(
            "CREATE OR REPLACE FUNCTION public.once(x integer) RETURNS integer LANGUAGE plpgsql IMMUTABLE"
            f" AS $$ BEGIN RETURN ({COUNTER})::int; END $$"
        )
        replaced = r"function public\.once\(x integer\), accepted by its --allow opt-in, was replaced"
        with pytest.raises(SqlConfigError, match=replaced), engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # before: passed, and the counter ran per row
    finally:
        engine.close()
        pg.admin.execute("DROP FUNCTION public.once(integer)")


@pytest.mark.postgres
def test_a_view_replaced_while_serving_voids_its_view_order_opt_in(pg: PgScratch, tmp_path: Path) -> None:
    view = "CREATE OR REPLACE VIEW public.v_cat WITH (security_invoker = on) AS SELECT relname, reltuples"
    engine = SqlEngine(pg.reader_url)
    try:
        known = _started(engine, OTHERS, tmp_path)
        verify = order_check(MaskPolicy.of(["customers.email"]), known, MASKED, OTHERS)
        with engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # nothing changed
        pg.admin.execute(f"{view} FROM pg_class WHERE relname LIKE 'customers%'")
        replaced = r"view public\.v_cat, accepted by its --allow opt-in, was replaced"
        with pytest.raises(SqlConfigError, match=replaced), engine.session(30.0, "test") as (conn, _):
            verify(engine, conn)  # before: passed (the opt-in named the view, not its query)
    finally:
        engine.close()
        pg.admin.execute(f"{view} FROM pg_class WHERE relnamespace = 2200")


@pytest.mark.postgres
def test_an_extension_member_with_its_own_path_is_reviewed_only_over_its_schemas(
    pg: PgScratch, engine: SqlEngine
) -> None:
    pg.admin.execute(
        "ALTER FUNCTION ext.latitude(ext.earth) SET search_path = pg_catalog, ext;"
        " ALTER FUNCTION ext.longitude(ext.earth) SET search_path = public, ext"
    )
    try:
        with engine.session(30.0, "test") as (conn, _):
            per_row = engine.profile.row_order_routines(conn)
    finally:
        pg.admin.execute(
            "ALTER FUNCTION ext.latitude(ext.earth) RESET ALL;"
            " ALTER FUNCTION ext.longitude(ext.earth) RESET ALL"
        )
    assert ("ext", "latitude") not in per_row, per_row  # its calls resolve in pg_catalog and ext only
    assert ("ext", "longitude") in per_row, per_row  # before: exempt, `public` first on its path
