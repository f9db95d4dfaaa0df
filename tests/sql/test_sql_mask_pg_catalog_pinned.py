"""No operator, function or type on the reader's path answers a PostgreSQL start-up check.

Every catalog answer of `PostgresProfile` is read with pg_catalog alone on the search_path
(`catalog_path.pinned`); the reader's names are resolved on its own path by queries with no
operator (`on_path`, `reader_schemas`). The guard: the reader's path is `public, pg_catalog`, where
a user operator of pg_catalog's own argument types wins too, and public holds capture operators
(`=`, `<>`, `<`, `>`, `<=`, `>=`, `||`, `~`, `~~` over oid, regclass, name, text, "char", ...)
and functions (`quote_ident`, `pg_table_is_visible`, `has_table_privilege`): every check over a
realistic fixture (masks with partitions, a generated column, a row-type copy, a catalog-held value,
a trigger, an owner-rights view and function, a role one SET ROLE away, an opt-in, a policy)
answers as it does without them. Before, the captured `=` emptied every join (no finding at all),
and a captured `||` made the catalog fingerprint blind to a new view.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcpkit.sql.definers import DefinerCatalog
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.profiles.postgres.catalog import PostgresCatalog
from mcpkit.sql.profiles.stored import stored_queries
from mcpkit.sql.relcheck import read_relations
from tests.sql.sql_support import PgScratch, pg_admin, pg_customers, pg_scratch

MASKED = {"customers": frozenset({"email", "secret"}), "accounts": frozenset({"email"})}
ALLOW = ["function-order:public.tally"]
_TYPES = [
    ("oid", "oid"), ("oid", "regclass"), ("oid", "integer"), ("oid", "bigint"), ("name", "name"),
    ("name", "text"), ("text", "text"), ("text", "name"), ("regclass", "regclass"), ('"char"', '"char"'),
    ("smallint", "smallint"), ("integer", "integer"), ("bigint", "bigint"), ("regproc", "regproc"),
]  # fmt: skip
_CAPTURED = [(op, left, right) for op in ("=", "<>", "<", ">", "<=", ">=") for left, right in _TYPES]
_CAPTURED += [(op, left, right) for op in ("~", "~~", "!~", "!~~") for left, right in _TYPES if left != "oid"]
_FUNCTIONS = ("quote_ident", "pg_table_is_visible", "has_table_privilege", "format")
_CONCAT = [("text", "text"), ("bigint", "text"), ("text", "numeric"), ("text", "name"), ("name", "text")]


@pytest.fixture(scope="module")
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "pinpath") as db:
        pg_customers(db)
        switch = f"{db.reader}_sw"
        db.admin.execute(
            f"""
            ALTER TABLE customers ADD COLUMN secret text DEFAULT 'kept in the catalog';
            GRANT SELECT (secret) ON customers TO {db.reader};
            CREATE TABLE accounts (id int, email text, low text GENERATED ALWAYS AS (lower(email)) STORED)
              PARTITION BY RANGE (email);
            CREATE TABLE accounts_a PARTITION OF accounts FOR VALUES FROM (MINVALUE) TO ('m');
            CREATE TABLE accounts_b PARTITION OF accounts FOR VALUES FROM ('m') TO (MAXVALUE);
            GRANT SELECT (id) ON accounts TO {db.reader};
            GRANT SELECT ON accounts_a TO {db.reader};
            CREATE TABLE snaps (id int, snap customers);
            GRANT SELECT ON snaps TO {db.reader};
            CREATE VIEW v_mail AS SELECT id, email FROM customers;
            GRANT SELECT ON v_mail TO {db.reader};
            CREATE FUNCTION peek_mail(int) RETURNS text LANGUAGE sql STABLE SECURITY DEFINER
              AS 'SELECT email FROM public.customers WHERE id = $1';
            CREATE FUNCTION vol() RETURNS integer LANGUAGE sql VOLATILE AS 'SELECT 1';
            CREATE FUNCTION tally(integer) RETURNS integer LANGUAGE sql STABLE AS 'SELECT $1';
            CREATE FUNCTION peek(text) RETURNS real LANGUAGE sql STABLE
              AS $$ SELECT reltuples FROM pg_class WHERE relname = $1 $$;
            CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
            CREATE TRIGGER touch BEFORE INSERT ON customers FOR EACH ROW EXECUTE FUNCTION touch();
            CREATE TABLE notes (id int);
            ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
            CREATE POLICY few ON notes USING (id IN (SELECT c.id FROM customers c LIMIT 2));
            GRANT SELECT ON notes TO {db.reader};
            CREATE ROLE {switch} NOLOGIN;
            GRANT SELECT ON customers TO {switch};
            GRANT {switch} TO {db.reader};
            ALTER ROLE {db.reader} IN DATABASE {db.db} SET search_path = public, pg_catalog;
            """
        )
        try:
            yield db
        finally:
            db.admin.close()
            with pg_admin(pg_url) as c:
                c.execute(f"DROP DATABASE IF EXISTS {db.db} WITH (FORCE)")
                c.execute(f"DROP ROLE IF EXISTS {switch}")


def _capture(pg: PgScratch) -> None:
    sql = []
    for n, (op, left, right) in enumerate(_CAPTURED):
        answer = "true" if op == "<>" else "false"
        sql.append(
            f"CREATE FUNCTION public.cap_{n}({left}, {right}) RETURNS boolean LANGUAGE sql IMMUTABLE"
            f" AS 'SELECT {answer}'; CREATE OPERATOR public.{op} (LEFTARG = {left}, RIGHTARG = {right},"
            f" FUNCTION = public.cap_{n})"
        )
    for n, (left, right) in enumerate(_CONCAT):
        sql.append(
            f"CREATE FUNCTION public.cap_cat_{n}({left}, {right}) RETURNS text LANGUAGE sql IMMUTABLE"
            f" AS $$ SELECT 'cap' $$; CREATE OPERATOR public.|| (LEFTARG = {left}, RIGHTARG = {right},"
            f" FUNCTION = public.cap_cat_{n})"
        )
    sql += [
        "CREATE FUNCTION public.quote_ident(text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'cap' $$",
        "CREATE FUNCTION public.pg_table_is_visible(oid) RETURNS boolean LANGUAGE sql AS 'SELECT false'",
        "CREATE FUNCTION public.has_table_privilege(oid, text) RETURNS boolean LANGUAGE sql"
        " AS 'SELECT false'",
        "CREATE FUNCTION public.format(text, text, text) RETURNS text LANGUAGE sql AS $$ SELECT 'cap' $$",
    ]
    pg.admin.execute("; ".join(sql))


def _uncapture(pg: PgScratch) -> None:
    pg.admin.execute(
        "SET search_path = pg_catalog;"
        " DO $$ DECLARE f regprocedure; BEGIN FOR f IN SELECT p.oid FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
        " AND (p.proname LIKE 'cap\\_%' OR p.proname = ANY(ARRAY['quote_ident', 'pg_table_is_visible',"
        " 'has_table_privilege', 'format'])) LOOP EXECUTE pg_catalog.format('DROP FUNCTION %s CASCADE', f);"
        " END LOOP; END $$; RESET search_path"
    )


def _shown(items: Any) -> list[str]:
    """Each answer as text, the capture's own functions aside (they are user functions too)."""
    own = [f"{q}{f}" for f in _FUNCTIONS for q in ("'", "public.")]
    return sorted(s for s in map(repr, items) if "cap_" not in s and not any(f in s for f in own))


def _answers(pg: PgScratch) -> dict[str, list[str]]:
    engine = SqlEngine(pg.reader_url)
    try:
        with engine.session(30.0, "test") as (conn, _):
            p = engine.profile
            out = {
                "path": [conn.exec_driver_sql("SHOW search_path").scalar()],
                "name_path": list(p.name_path(conn)),
                "derived": _shown(p.derived_masks(conn, MASKED)),
                "use_masks": _shown(p.use_masks(conn, MASKED)),
                "stored": _shown(
                    (q.kind, q.schema, q.name, q.hidden) for q in stored_queries(p, conn, MASKED)
                ),
                "withheld": _shown(p.mask_withheld(conn, MASKED)),
                "preparation": _shown(p.mask_preparation(conn, MASKED)),
                "triggers": _shown(p.trigger_hints(conn, MASKED)),
                "scan": _shown(p.scan_order_hints(conn, MASKED)),
                "per_row": _shown(p.row_order_routines(conn)),
                "catalog": _shown(p.catalog_routines(conn)),
                "catalog_stored": _shown(p.catalog_stored(conn)),
                "accepted": _shown(p.order_accepted(conn, ALLOW)),
                "bodies": _shown(p.accepted_bodies(conn, ALLOW)),
                "key": p.primary_key(conn, None, "customers"),
                "readable": _shown(p.readable(conn)),
            }
            found = p.inspect(conn, engine.url, frozenset()).findings  # SET LOCAL its own
            out["account"] = _shown(f for f in found if f.code != "catalog-operator")
            out["capture"] = sorted(
                f.message.split(" over ")[0] for f in found if f.code == "catalog-operator"
            )
            out["capture_fix"] = [f.fix for f in found if f.code == "catalog-operator"][:1]
            out["path_after"] = [conn.exec_driver_sql("SHOW search_path").scalar()]
            out["relations"] = _shown((read_relations(engine, conn) or {}).items())
        # The admission's catalogs, read on the reader's path in a call's session (qualified SQL).
        refs = {
            (None, "vol"),
            (None, "tally"),
            (None, "peek_mail"),
            ("public", "peek_mail"),
            (None, "now"),
        }
        out["volatile"] = _shown(PostgresCatalog(engine).volatile(refs))
        out["definers"] = _shown(DefinerCatalog(engine).volatile(refs))
        out["views"] = _shown(
            PostgresCatalog(engine).view_nodes({(None, "v_mail"), ("public", "v_mail")}).items()
        )
        out["columns"] = _shown(PostgresCatalog(engine).relation_columns({(None, "customers")}).items())
        out["outputs"] = _shown(PostgresCatalog(engine).function_columns((None, "peek")))
    finally:
        engine.close()
    return out


def _fingerprints(pg: PgScratch) -> tuple[str | None, str | None]:
    engine = SqlEngine(pg.reader_url)
    try:
        with engine.session(30.0, "test") as (_, dbapi):
            before = engine.profile.catalog_fingerprint(dbapi)
        pg.admin.execute("CREATE VIEW public.later AS SELECT 1 AS one")
        with engine.session(30.0, "test") as (_, dbapi):
            after = engine.profile.catalog_fingerprint(dbapi)
    finally:
        pg.admin.execute("DROP VIEW IF EXISTS public.later")
        engine.close()
    return before, after


@pytest.mark.postgres
def test_capture_operators_on_the_readers_path_change_no_start_up_answer(pg: PgScratch) -> None:
    plain = _answers(pg)
    assert plain["derived"] and plain["use_masks"] and plain["stored"] and plain["withheld"], plain
    assert plain["preparation"] and plain["triggers"] and plain["scan"] and plain["accepted"], plain
    assert plain["volatile"] == ["(None, 'vol')"], plain
    assert plain["definers"] == ["('public', 'peek_mail')", "(None, 'peek_mail')"], plain
    assert plain["relations"] and plain["columns"] and plain["views"], plain
    assert plain["key"] == ["id"] and plain["name_path"] == ["public", "pg_catalog"], plain
    _capture(pg)
    try:
        captured = _answers(pg)
        before, after = _fingerprints(pg)
    finally:
        _uncapture(pg)
    assert plain["capture"] == [], plain
    shown = captured.pop("capture")
    assert "operator public.>=(oid, integer)" in shown and 'operator public.=("char", "char")' in shown, shown
    assert "operator public.~~(name, text)" in shown, shown
    # a twin of pg_catalog's textcat ahead of it on the path answers every `||` (red team rtA F3)
    assert "operator public.||(text, text)" in shown, shown
    assert captured.pop("capture_fix") == [
        'DROP OPERATOR "public".!~ ("char", "char") (or REVOKE USAGE ON SCHEMA'
        ' "public" from the role and take the schema off its search_path)'
    ], shown
    for name, answer in plain.items():
        assert captured.get(name, []) == answer, (name, captured.get(name), answer)  # before: most empty
    assert before != after  # before: the captured `||` made every catalog's part the same


@pytest.mark.postgres
def test_a_masked_name_still_resolves_on_the_readers_path(pg: PgScratch) -> None:
    """The reader's path decides which `customers` a check reads: a table of that name in a schema
    before public is the one the calls read, capture operators or not."""
    _capture(pg)
    pg.admin.execute(
        f"CREATE SCHEMA pinfirst; GRANT USAGE ON SCHEMA pinfirst TO {pg.reader};"
        " CREATE TABLE pinfirst.customers (id int, email text, secret text);"
        f" GRANT SELECT ON pinfirst.customers TO {pg.reader};"
        f" ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = pinfirst, public, pg_catalog"
    )
    try:
        engine = SqlEngine(pg.reader_url)
        try:
            with engine.session(30.0, "test") as (conn, _):
                found = engine.profile.use_masks(conn, {"customers": frozenset({"email"})})
        finally:
            engine.close()
    finally:
        pg.admin.execute(
            f"ALTER ROLE {pg.reader} IN DATABASE {pg.db} SET search_path = public, pg_catalog;"
            " DROP SCHEMA pinfirst CASCADE"
        )
        _uncapture(pg)
    # pinfirst.customers grants every column: its email is readable (public's is not).
    shown = [f.message for f in found if f.code == "masked-column-readable"]
    assert shown == ["can read masked column(s) email of pinfirst.customers"], found  # before: none


def test_every_catalog_answer_of_the_profile_is_pinned() -> None:
    """A `PostgresProfile` method given the session reads the catalog: it must run under
    `catalog_path` (`@pinned`), but the few that read the reader's own path or write."""
    import inspect

    from mcpkit.sql.profiles.postgres import PostgresProfile
    from mcpkit.sql.profiles.postgres.catalog_path import pinned

    marker = pinned(lambda *_: None).__code__
    own = {"name_path", "catalog_reads", "grant"}  # the reader's path; the scope itself; an admin's script
    unpinned = [
        name
        for name, fn in inspect.getmembers(PostgresProfile, inspect.isfunction)
        if "conn" in inspect.signature(fn).parameters
        and fn.__qualname__.startswith("PostgresProfile.")
        and name not in own
        and fn.__code__ is not marker
    ]
    assert unpinned == []
