"""Functions PostgreSQL runs without admission seeing their name (red team rt23 F1, F4, F7).

Attribute notation `o.f` calls `f(orders)`, a view stores its calls by OID (EXECUTE is all it
needs, no USAGE on the function's schema), and `--allow function:S.F` must not cover an overload
added later.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import pytest
import sqlglot

from mcpkit.sql.admission.limit_expansion import RelationRef
from mcpkit.sql.admission.reject_attribute_calls import reject_attribute_calls
from mcpkit.sql.errors import Refused
from tests.sql.sql_support import PgScratch, pg_scratch
from tests.sql.sql_support import run_cli as _run

CONFIGURED = (
    "SET max_parallel_workers_per_gather = 4 SET statement_timeout = 0"
    " BEGIN ATOMIC SELECT current_setting('max_parallel_workers_per_gather') || '/'"
    " || current_setting('statement_timeout'); END"
)


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "fnreach") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE orders (id int PRIMARY KEY, total int);
            INSERT INTO orders VALUES (1, 10), (2, 20);
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT ON orders TO {db.reader};
            """
        )
        yield db


def _calls(pg: PgScratch) -> int:
    """How often a side-effecting function ran (its sequence; the cluster's xid moves with other users)."""
    row = pg.admin.execute("SELECT last_value, is_called FROM fnreach_seq").fetchone()
    assert row is not None
    return int(row[0]) + int(row[1])


@pytest.mark.postgres
def test_postgres_a_configured_function_called_by_attribute_notation_refuses_start_up(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    # not on the allowlist: `o.f` runs it all the same (rt23 F1)
    pg.admin.execute(f"CREATE FUNCTION f_attr(o orders) RETURNS text STABLE LANGUAGE sql {CONFIGURED}")
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "SELECT o.id FROM orders o")
    assert code == 2, out
    assert "function public.f_attr(public.orders) sets max_parallel_workers_per_gather = 4" in out, out
    assert "attribute notation" in out
    assert "ALTER FUNCTION public.f_attr(public.orders) RESET statement_timeout" in out
    assert "(or --allow function-config:public.f_attr)" in out
    code, out = _run(
        capsys, "sql", "query", "--dsn", pg.reader_url, "--allow", "function-config:public.f_attr",
        "SELECT o.id FROM orders o",
    )  # fmt: skip
    assert code == 0, out


@pytest.mark.postgres
def test_postgres_a_view_calling_a_configured_function_in_an_unusable_schema_refuses_start_up(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the reader has no USAGE on fnreach_priv: a call stored in a view needs EXECUTE only (rt23 F7)
    pg.admin.execute(
        "CREATE SCHEMA fnreach_priv;"
        f" CREATE FUNCTION fnreach_priv.f_cfgv() RETURNS text STABLE LANGUAGE sql {CONFIGURED};"
        " CREATE VIEW v_cfgv WITH (security_invoker = true) AS SELECT fnreach_priv.f_cfgv() AS s;"
        f" GRANT SELECT ON v_cfgv TO {pg.reader}"
    )
    code, out = _run(capsys, "sql", "doctor", "--dsn", pg.reader_url)
    assert "fail least privilege: function fnreach_priv.f_cfgv() sets max_parallel_workers_per_gather" in out
    assert "ALTER FUNCTION fnreach_priv.f_cfgv() RESET max_parallel_workers_per_gather" in out
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "SELECT s FROM v_cfgv")
    assert code == 2, out
    assert "4/0" not in out


@pytest.mark.postgres
def test_postgres_a_volatile_function_callable_by_attribute_notation_refuses_start_up(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"CREATE SEQUENCE fnreach_seq; GRANT USAGE ON SEQUENCE fnreach_seq TO {pg.reader};"
        " CREATE FUNCTION f_xid(o orders) RETURNS text VOLATILE LANGUAGE sql"
        " BEGIN ATOMIC SELECT nextval('fnreach_seq')::text; END"
    )
    before = _calls(pg)
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "SELECT o.f_xid FROM orders o")
    assert code == 2, out
    assert "function public.f_xid(public.orders) is VOLATILE" in out, out
    assert _calls(pg) == before


class _Columns:
    def relation_columns(self, refs: Collection[RelationRef]) -> dict[RelationRef, frozenset[str] | None]:
        known = {(None, "orders"): frozenset({"id", "total", "ctid"}), ("s", "orders"): frozenset({"id"})}
        return {r: known.get(r) for r in refs}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.f FROM orders o",
        "SELECT orders.f FROM orders",
        "SELECT s.orders.f FROM s.orders",
        "SELECT d.f FROM (SELECT id AS x FROM orders) d",
        "WITH c AS (SELECT id FROM orders) SELECT c.f FROM c",
        "SELECT (SELECT o.f FROM orders p WHERE p.id = o.id) FROM orders o",
        "SELECT o.id FROM orders o ORDER BY o.f",
        "SELECT v.f FROM (VALUES (1)) v(a)",
        "SELECT d.f FROM (SELECT * FROM orders) d",
        "SELECT g.abs FROM generate_series(-1, 1) AS g(x)",
        "SELECT u.abs FROM unnest(ARRAY[-1]) AS u(x)",
        "SELECT d.f FROM (SELECT o.*, 1 AS x FROM orders o) d",
        "SELECT m.anything FROM f() m",  # a function's columns unknown: refused (rt24 F3)
        "SELECT q.k FROM unnest(ARRAY[1]) q",
        "SELECT x.total FROM orders x(n, t)",  # renamed: `x.total` would call total(orders)
        "SELECT d.anything FROM (SELECT * FROM unknown) d",  # columns not known: refused (rt25 F1)
        "SELECT d.anything FROM (SELECT count(*) FROM orders) d",  # a made-up name: `count` only
    ],
)
def test_a_qualified_name_that_is_no_column_is_refused(sql: str) -> None:
    with pytest.raises(Refused) as caught:
        reject_attribute_calls(sqlglot.parse_one(sql, read="postgres"), "postgres", catalog=_Columns())
    assert (caught.value.data or {}).get("reason") == "attribute_call"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.id, o.ctid, O.TOTAL FROM orders o",
        "SELECT s.orders.id FROM s.orders",
        "SELECT d.x FROM (SELECT id AS x FROM orders) d",
        "WITH c(y) AS (SELECT id FROM orders) SELECT c.y FROM c",
        "SELECT u.f FROM unknown u",  # no relation the catalog knows: the database's error
        "SELECT d.total, d.x, e.id FROM (SELECT o.*, 1 AS x FROM orders o) d, (SELECT * FROM orders) e",
        "SELECT g.x, u.y FROM generate_series(1, 2) g(x), unnest(ARRAY[1]) u(y)",
        "SELECT upper(x.t) AS shout, x.n FROM orders x(n, t) ORDER BY x.n",  # an alias column list
    ],
)
def test_a_qualified_column_passes(sql: str) -> None:
    reject_attribute_calls(sqlglot.parse_one(sql, read="postgres"), "postgres", catalog=_Columns())


@pytest.mark.postgres
def test_postgres_attribute_notation_calling_a_function_is_refused(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        "CREATE FUNCTION f_row(o orders) RETURNS text STABLE LANGUAGE sql BEGIN ATOMIC SELECT 'called'; END;"
        f" GRANT SELECT ON orders TO {pg.reader}"
    )
    for sql in ("SELECT o.f_row FROM orders o", "SELECT orders.f_row FROM orders"):
        code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, sql)
        assert code != 0, out
        assert "called" not in out and "Attribute notation" in out, out
    code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, "SELECT o.id, o.total FROM orders o")
    assert code == 0 and "| 2 " in out, out


@pytest.mark.postgres
def test_postgres_a_name_only_opt_in_does_not_cover_an_overload(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        "CREATE FUNCTION f_ov() RETURNS text STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN 'read'; END $$"
    )
    base = ["sql", "query", "--dsn", pg.reader_url]
    code, out = _run(capsys, *base, "--allow", "function:public.f_ov", "SELECT public.f_ov() AS r")
    assert code == 0 and "| read |" in out, out
    # added later: SECURITY DEFINER, a side effect as its owner (rt23 F4)
    pg.admin.execute(
        f"CREATE SEQUENCE fnreach_seq; GRANT USAGE ON SEQUENCE fnreach_seq TO {pg.reader};"
        " CREATE FUNCTION f_ov(i int) RETURNS text STABLE LANGUAGE plpgsql SECURITY DEFINER"
        " AS $$ BEGIN RETURN nextval('fnreach_seq')::text; END $$"
    )
    before = _calls(pg)
    code, out = _run(capsys, *base, "--allow", "function:public.f_ov", "SELECT public.f_ov(1) AS r")
    assert code == 2, out
    assert (
        "--allow function:public.f_ov names 2 functions (public.f_ov(), public.f_ov(integer)) and accepts"
        " none of them" in out
    ), out
    assert "--allow function:public.f_ov() --allow function:public.f_ov(integer)" in out
    code, out = _run(capsys, *base, "--allow", "function:public.f_ov()", "SELECT public.f_ov() AS r")
    assert code == 2, out
    assert "function public.f_ov(integer) runs as its owner (SECURITY DEFINER)" in out, out
    assert "(or --allow function:public.f_ov(integer))" in out, out
    assert "public.f_ov() is written in plpgsql" not in out  # the reviewed one stays accepted
    assert _calls(pg) == before
    both = ["--allow", "function:public.f_ov()", "--allow", "function:public.f_ov(int)"]
    code, out = _run(capsys, *base, *both, "SELECT public.f_ov() AS r")
    assert code == 0 and "| read |" in out, out


@pytest.mark.postgres
def test_postgres_a_configured_overload_needs_its_own_signature(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"CREATE FUNCTION f_c(o orders) RETURNS text STABLE LANGUAGE sql {CONFIGURED};"
        f" CREATE FUNCTION f_c(i int) RETURNS text STABLE LANGUAGE sql {CONFIGURED}"
    )
    base = ["sql", "doctor", "--dsn", pg.reader_url]
    _, out = _run(capsys, *base, "--allow", "function-config:public.f_c")
    assert "--allow function-config:public.f_c names 2 functions" in out, out
    assert "(or --allow function-config:public.f_c(integer))" in out, out
    _, out = _run(
        capsys, *base, "--allow", "function-config:public.f_c(orders)", "--allow",
        "function-config:public.f_c(INT4)",
    )  # fmt: skip
    assert "fail least privilege" not in out, out


@pytest.mark.postgres
def test_postgres_attribute_notation_through_a_function_in_from_is_refused(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    # red team rt24 F3: a function in FROM without a column list hid q's row type from the check
    pg.admin.execute(
        "CREATE TYPE rowt AS (x int); CREATE FUNCTION k(v rowt) RETURNS text STABLE LANGUAGE sql"
        f" BEGIN ATOMIC SELECT 'k ran'; END; GRANT USAGE ON TYPE rowt TO {pg.reader}"
    )
    for sql in (
        "SELECT q.k FROM unnest(ARRAY['(5)'::rowt]) q",
        """SELECT q.k FROM jsonb_populate_record(NULL::rowt, '{"x": 7}') q""",
        "SELECT q.k FROM (SELECT 5 AS x) s, LATERAL unnest(ARRAY['(6)'::rowt]) q",
        "SELECT q.pg_column_size FROM unnest(ARRAY['(5)'::rowt]) q",
        "SELECT q.q FROM unnest(ARRAY['(5)'::rowt]) q",
    ):
        code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, sql)
        assert code != 0 and "k ran" not in out and "Attribute notation" in out, (sql, out)
    for sql, want in (
        ("""SELECT e.key, e.value FROM jsonb_each('{"a": 1}'::jsonb) e""", "| a "),
        ("SELECT g FROM generate_series(1, 3) g", "| 3 "),
        ("SELECT g.g FROM generate_series(1, 3) g", "| 3 "),
        ("SELECT u FROM unnest(ARRAY[4]) u", "| 4 "),
        ("SELECT t.x FROM unnest(ARRAY[5]) AS t(x)", "| 5 "),
        ("""SELECT r.a FROM json_to_record('{"a": 6}') AS r(a int)""", "| 6 "),
        ("SELECT s.n FROM generate_series(1, 7) AS s(n)", "| 7 "),
        ("SELECT q.x FROM unnest(ARRAY['(8)'::rowt]) AS q(x)", "| 8 "),
        ("""SELECT e.key, e.ordinality FROM jsonb_each('{"b": 1}'::jsonb) WITH ORDINALITY e""", "| b "),
        ("SELECT u.ordinality FROM unnest(ARRAY[9]) WITH ORDINALITY u", "| 1 "),
    ):  # fmt: skip
        code, out = _run(capsys, "sql", "query", "--dsn", pg.reader_url, sql)
        assert code == 0 and want in out, (sql, out)
