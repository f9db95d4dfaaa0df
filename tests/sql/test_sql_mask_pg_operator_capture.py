"""PostgreSQL start-up checks read the catalog whatever operators the reader's path holds.

- An unqualified operator in the checks' own catalog queries resolved on the reader's search_path,
  where an exact match of another schema beats pg_catalog's operator that needs a coercion: a user
  `public.>=(oid, integer)` answering false made `p.oid >= 16384` drop every user function (no
  per-row function, no catalog finding, no operator, cast or domain reached), and a user
  `public.=(oid, regclass)` answers `d.classid = 'pg_catalog.pg_proc'::regclass` (`catalog_path`).
- An extension's string body resolves its operators and type names on the caller's path as well:
  citext's `$3 || 'i'` runs a user `public.||(text, text)` when the reader's path lists pg_catalog
  after public. Every user operator's function (and cast's, domain CHECK's, type's I/O) counts as
  reached already (`implicit`), so start-up refuses it however the body reaches it.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.profiles.stored import stored_queries
from tests.sql.sql_support import PgScratch, pg_customers, pg_need_extensions, pg_scratch

COUNTER = (
    "pg_catalog.set_config('opcap.c', (coalesce(nullif(pg_catalog.current_setting('opcap.c', true), ''),"
    " '0')::pg_catalog.int4 OPERATOR(pg_catalog.+) 1)::pg_catalog.text, false)"
)
MASKED = {"customers": frozenset({"email"})}


@pytest.fixture(scope="module")
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "opcap") as db:
        pg_need_extensions(db.admin, "citext")
        pg_customers(db)
        db.admin.execute(
            f"""
            CREATE SCHEMA ext;
            GRANT USAGE ON SCHEMA ext TO {db.reader};
            CREATE EXTENSION citext SCHEMA ext;
            CREATE FUNCTION public.tally(integer) RETURNS integer LANGUAGE sql STABLE
              AS $$ SELECT {COUNTER}::pg_catalog.int4 $$;
            CREATE FUNCTION public.peek(text) RETURNS real LANGUAGE sql STABLE
              AS $$ SELECT reltuples FROM pg_class WHERE relname = $1 $$;
            CREATE FUNCTION public.cat(text, text) RETURNS text LANGUAGE sql STABLE
              AS $$ SELECT CASE WHEN {COUNTER} IS NULL THEN NULL ELSE $1 OPERATOR(pg_catalog.||) $2 END $$;
            CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = public.cat);
            CREATE VIEW public.v_mail AS SELECT id, email FROM customers;
            GRANT SELECT ON public.v_mail TO {db.reader};
            CREATE TABLE public.notes (id int);
            ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
            CREATE POLICY few ON public.notes USING (id IN (SELECT c.id FROM customers c LIMIT 2));
            GRANT SELECT ON public.notes TO {db.reader};
            """
        )
        yield db


def _capture(pg: PgScratch) -> None:
    pg.admin.execute(
        "CREATE FUNCTION public.never(oid, integer) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT false';"
        " CREATE OPERATOR public.>= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.never);"
        " CREATE FUNCTION public.never(oid, regclass) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT false';"
        " CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.never)"
    )


def _uncapture(pg: PgScratch) -> None:
    pg.admin.execute(
        "DROP OPERATOR public.>= (oid, integer); DROP FUNCTION public.never(oid, integer);"
        " DROP OPERATOR public.= (oid, regclass); DROP FUNCTION public.never(oid, regclass)"
    )


@pytest.mark.postgres
def test_a_user_operator_on_the_readers_path_does_not_answer_the_checks(pg: PgScratch) -> None:
    _capture(pg)
    engine = SqlEngine(pg.reader_url)
    try:
        with engine.session(30.0, "test") as (conn, _):
            per_row = engine.profile.row_order_routines(conn)
            catalog = engine.profile.catalog_routines(conn)
            found = {(q.schema, q.name): q.hidden or "" for q in stored_queries(engine.profile, conn, MASKED)}
            path = conn.exec_driver_sql("SHOW search_path").scalar()
    finally:
        engine.close()
        _uncapture(pg)
    assert ("public", "tally") in per_row and ("public", "never") in per_row, per_row  # before: {}
    assert ("public", "peek") in catalog, catalog  # before: no catalog finding
    assert ("public", "v_mail") in found and ("public", "notes.few") in found, found  # before: neither
    assert "operator public.||(text,text)" in found.get(("public", "cat"), ""), found  # before: absent
    assert path == '"$user", public'  # the reader's own path is back


@pytest.mark.postgres
def test_an_extension_body_reaching_a_user_operator_is_refused_at_start_up(pg: PgScratch) -> None:
    reader = pg.reader
    pg.admin.execute(f"ALTER ROLE {reader} IN DATABASE {pg.db} SET search_path = public, pg_catalog")
    try:
        # The body's `||` is the user's on that path: the counter runs once per row.
        with psycopg.connect(pg.reader_url, autocommit=True) as raw:
            raw.execute("SELECT ext.regexp_match(name::ext.citext, 'A', 'x') FROM customers").fetchall()
            counted = raw.execute("SELECT current_setting('opcap.c', true)").fetchone()
        assert counted == ("5",), counted
        engine = SqlEngine(pg.reader_url)
        try:
            with engine.session(30.0, "test") as (conn, _):
                per_row = engine.profile.row_order_routines(conn)
                found = {(q.schema, q.name): q for q in stored_queries(engine.profile, conn, MASKED)}
        finally:
            engine.close()
    finally:
        pg.admin.execute(f"ALTER ROLE {reader} IN DATABASE {pg.db} RESET search_path")
    # Start-up refuses the operator's function over masked reads (only `function-order:` accepts it);
    # so did the code before, which read this path's `||` as the user's (`operator ||(text,text)`).
    assert "||(text,text) runs it for each row" in (found[("public", "cat")].hidden or ""), found
    assert found[("public", "cat")].usable and ("public", "cat") in per_row, found
