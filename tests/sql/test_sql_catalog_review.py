"""Every PostgreSQL catalog relation is reviewed, and catalog text an operator wrote is never served.

Red team pg11 F7: comments, view definitions, policy expressions, defaults, foreign-table options
and trigger arguments of objects in a schema the reader cannot use were answered from the catalogs
admission left open.
"""

from __future__ import annotations

import secrets

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission.function_tables.postgres import NEVER_RELATIONS
from mcpkit.sql.admission.function_tables.postgres_catalogs import CATALOG_READABLE
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_admin, pg_need_extensions, pg_scratch

pytestmark = pytest.mark.postgres


def _never(name: str) -> bool:
    return any(r.refuses("pg_catalog", name) for r in NEVER_RELATIONS)


def test_every_pg_catalog_relation_is_reviewed(pg_url: str) -> None:
    with pg_admin(pg_url) as c:
        rels = {
            str(r[0])
            for r in c.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'pg_catalog'::regnamespace"
                " AND relkind IN ('r', 'v', 'm', 'p', 'f')"
            )
        }
    assert len(rels) > 120
    unreviewed = sorted(n for n in rels if not _never(n) and n not in CATALOG_READABLE)
    both = sorted(n for n in rels if _never(n) and n in CATALOG_READABLE)
    assert unreviewed == [] and both == []
    assert sorted(CATALOG_READABLE - rels) == []  # no stale name


def test_catalog_text_of_hidden_objects_is_never_served(pg_url: str) -> None:
    token = f"MKSECRET{secrets.token_hex(6)}"
    with pg_scratch(pg_url, "cat") as s:
        a = s.admin
        pg_need_extensions(a, "file_fdw")
        a.execute("CREATE EXTENSION file_fdw")
        a.execute("CREATE SERVER mk_cat_files FOREIGN DATA WRAPPER file_fdw")
        a.execute("CREATE SCHEMA mk_cat_hid")
        a.execute(
            f"CREATE TABLE mk_cat_hid.cfg (id int CHECK (id <> length('{token}c')),"
            f" hook text DEFAULT 'https://hooks.example/{token}d', item text)"
        )
        a.execute(f"COMMENT ON TABLE mk_cat_hid.cfg IS 'rotate key {token}m'")
        a.execute(f"CREATE VIEW mk_cat_hid.v AS SELECT '{token}v'::text AS t")
        a.execute("ALTER TABLE mk_cat_hid.cfg ENABLE ROW LEVEL SECURITY")
        a.execute(f"CREATE POLICY p ON mk_cat_hid.cfg USING (item <> '{token}p')")
        a.execute(f"CREATE INDEX ON mk_cat_hid.cfg ((item || '{token}i'))")
        a.execute(
            "CREATE TRIGGER t BEFORE UPDATE ON mk_cat_hid.cfg FOR EACH ROW"
            f" EXECUTE FUNCTION suppress_redundant_updates_trigger('{token}t')"
        )
        a.execute(
            "CREATE FOREIGN TABLE mk_cat_hid.ext (a text) SERVER mk_cat_files"
            f" OPTIONS (program 'curl -H {token}f https://x.example', format 'csv')"
        )
        a.execute("CREATE TABLE public.items (id int, name text)")
        a.execute("INSERT INTO public.items VALUES (1, 'a')")
        a.execute(f"GRANT SELECT ON public.items TO {s.reader}")
        queries = [
            "SELECT description FROM pg_description WHERE description LIKE 'rotate%'",
            "SELECT definition FROM pg_views",
            "SELECT qual FROM pg_policies",
            "SELECT polqual::text FROM pg_policy",
            "SELECT adbin::text FROM pg_attrdef",
            "SELECT conbin::text FROM pg_constraint",
            "SELECT indexdef FROM pg_indexes",
            "SELECT indexprs::text FROM pg_index",
            "SELECT ftoptions::text FROM pg_foreign_table",
            "SELECT encode(tgargs, 'escape') FROM pg_catalog.pg_trigger",
            "SELECT ev_action::text FROM pg_rewrite",
            "SELECT view_definition FROM information_schema.views",
            "SELECT column_default FROM information_schema.columns",
            "SELECT check_clause FROM information_schema.check_constraints",
            "SELECT action_statement FROM information_schema.triggers",
            "SELECT option_value FROM information_schema.foreign_table_options",
            "SELECT pg_get_viewdef('mk_cat_hid.v'::regclass)",
            "SELECT obj_description('mk_cat_hid.cfg'::regclass, 'pg_class')",
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relname = 'items'",
        ]
        engine = SqlEngine(s.reader_url)
        try:
            service = SqlService(engine, timeout_s=5.0)
            answered = []
            for i, sql in enumerate(queries):
                try:
                    result, shown = service.query(sql, call_id=f"c{i}")
                except Refused as refused:
                    said = str(refused)
                else:
                    said = repr(result.rows) + shown
                    answered.append(sql)
                assert token not in said, sql
        finally:
            engine.close()
        # Introspection of what the reader can use still answers.
        assert queries[-1] in answered
