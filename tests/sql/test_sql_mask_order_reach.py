"""Stored SQL over a masked table that admission never names (independent red team rt23).

F2/F3: the order check read only the SQL functions the function policy allows, but attribute
notation (`o.f` calls `f(orders)`), an operator over a built-in symbol (`1 + true`), a cast
(`o::text`) and an aggregate's components run functions admission never names: each answered the
masked e-mail ranking with doctor ok. Now every function the reader may execute (and every
aggregate component, which PostgreSQL runs with no EXECUTE check) over a masked table is analysed.
F5: calls of calls were followed 8 deep, then silently not at all; now to a fixpoint. F6: a view
exposing `ctid` hands on the physical position, which follows the e-mail after CLUSTER.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sql.sql_support import PgScratch, masks_file, pg_scratch
from tests.sql.sql_support import run_cli as _run

SECRET = "@secret.example"
ROWS = [(1, "Ann", "b"), (2, "Bob", "d"), (3, "Cy", "e"), (4, "Dan", "a"), (5, "Eve", "c")]
AGG = "STABLE LANGUAGE sql BEGIN ATOMIC SELECT string_agg(c.name, ',') FROM public.customers c; END"
ROUTES = {  # function -> the SQL that reaches it without naming it, and its opt-in
    "f_attr": ("CREATE FUNCTION f_attr(o orders) RETURNS text", "SELECT o.f_attr AS r FROM orders o"),
    "f_op": ("CREATE FUNCTION f_op(a int, b boolean) RETURNS text", "SELECT 1 + true AS r"),
    "f_cast": ("CREATE FUNCTION f_cast(o orders) RETURNS text", "SELECT o::text AS r FROM orders o"),
    "f_step": ("CREATE FUNCTION f_step(s text, x int) RETURNS text", "SELECT cat1(1) AS r"),
}


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "orderreach") as db:
        rows = ", ".join(f"({i}, '{n}', '{e}{SECRET}')" for i, n, e in ROWS)
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE TABLE customers (id int PRIMARY KEY, name text, email text);
            INSERT INTO customers VALUES {rows};
            CREATE INDEX customers_email ON customers (email);
            CLUSTER customers USING customers_email;
            ANALYZE customers;
            CREATE TABLE orders (id int PRIMARY KEY);
            INSERT INTO orders VALUES (1);
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT SELECT (id, name) ON customers TO {db.reader};
            GRANT SELECT ON orders TO {db.reader};
            """
        )
        yield db


def _ranking(pg: PgScratch) -> str:
    """What the masked column hides: the names in e-mail order (the administrator's view)."""
    return str(pg.admin.execute("SELECT string_agg(name, ',' ORDER BY email) FROM customers").fetchone()[0])


@pytest.mark.postgres
def test_postgres_functions_admission_never_names_refuse_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for head, _ in ROUTES.values():
        pg.admin.execute(f"{head} {AGG}")
    pg.admin.execute("CREATE OPERATOR public.+ (leftarg = int, rightarg = boolean, function = f_op)")
    pg.admin.execute("CREATE CAST (orders AS text) WITH FUNCTION f_cast(orders)")
    # an aggregate component the reader may not execute: PostgreSQL checks the aggregate's owner
    pg.admin.execute("REVOKE EXECUTE ON FUNCTION f_step(text, int) FROM PUBLIC")
    pg.admin.execute("CREATE AGGREGATE cat1(int) (sfunc = f_step, stype = text)")
    masks = masks_file(tmp_path, "customers.email")
    base = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks, "--allow-function", "cat1"]
    for name, (_, sql) in ROUTES.items():
        code, out = _run(capsys, *base, sql)
        assert code == 2, (name, out)
        assert f"function public.{name} may answer in the scan order of a masked table" in out, (name, out)
        assert f"--allow function-order:public.{name}" in out
    # What the opt-ins accept, and what each route answered before: the e-mail ranking.
    opt_ins = [
        a for f in [*ROUTES, "cat1"] for a in ("--allow", f"function-order:public.{f}")
    ]  # cat1: per-row
    for name, (_, sql) in ROUTES.items():
        code, out = _run(capsys, *base, *opt_ins, sql)
        if name == "f_attr":  # the parser's line too: `o.f_attr` names no column of orders
            assert code == 3 and "Attribute notation" in out and _ranking(pg) not in out, out
            continue
        assert code == 0, (name, out)
        assert _ranking(pg) in out, (name, out)
    code, out = _run(capsys, "sql", "doctor", "--dsn", pg.reader_url, "--mask", masks)
    assert "fail masks: function public.f_attr may answer in the scan order" in out, out


@pytest.mark.postgres
def test_postgres_a_call_chain_deeper_than_eight_is_followed(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(f"CREATE FUNCTION f_c12() RETURNS text {AGG}")
    for n in range(11, 0, -1):
        pg.admin.execute(
            f"CREATE FUNCTION f_c{n}() RETURNS text STABLE LANGUAGE sql BEGIN ATOMIC SELECT f_c{n + 1}(); END"
        )
    masks = masks_file(tmp_path, "customers.email")
    base = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks, "--allow-function", "f_c1"]
    code, out = _run(capsys, *base, "SELECT f_c1() AS r")
    assert code == 2, out
    assert "function public.f_c1 may answer in the scan order of a masked table: it reads function" in out
    opt_ins = [a for n in range(1, 13) for a in ("--allow", f"function-order:public.f_c{n}")]
    code, out = _run(capsys, *base, *opt_ins, "SELECT f_c1() AS r")
    assert code == 0, out
    assert _ranking(pg) in out, out


@pytest.mark.postgres
def test_postgres_a_view_exposing_ctid_refuses_start_up(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = f"{pg.reader}_o"
    pg.admin.execute(f"CREATE ROLE {owner} NOLOGIN")
    try:
        pg.admin.execute(f"GRANT USAGE, CREATE ON SCHEMA public TO {owner}")
        pg.admin.execute(f"GRANT SELECT ON customers TO {owner}")
        pg.admin.execute(f"SET ROLE {owner}")
        pg.admin.execute("CREATE VIEW v_pos AS SELECT id, ctid::text AS pos FROM customers")
        pg.admin.execute("RESET ROLE")
        pg.admin.execute(f"GRANT SELECT ON v_pos TO {pg.reader}")
        masks = masks_file(tmp_path, "customers.email")
        base = ["sql", "query", "--dsn", pg.reader_url, "--mask", masks, "--allow", "view:public.v_pos"]
        sql = (
            "SELECT string_agg(c.name, ',' ORDER BY v.pos) AS r FROM v_pos v JOIN customers c ON c.id = v.id"
        )
        code, out = _run(capsys, *base, sql)
        assert code == 2, out
        assert (
            "view public.v_pos may answer in the scan order of a masked table: it reads system column ctid"
        ) in out, out
        code, out = _run(capsys, *base, "--allow", "view-order:public.v_pos", sql)
        assert code == 0, out
        assert _ranking(pg) in out, out
        # and the call-time analysis refuses a system column of a masked table in the call itself
        for call in [
            "SELECT id FROM customers ORDER BY ctid",
            "SELECT id FROM customers WHERE ctid < '(0,3)'",
            "SELECT c.ctid::text AS p, id FROM customers c",
            "SELECT id FROM customers ORDER BY xmin, id",
        ]:
            code, out = _run(capsys, *base, "--allow", "view-order:public.v_pos", call)
            assert "REFUSED" in out and SECRET not in out, (call, out)
    finally:
        pg.admin.execute("RESET ROLE")
        pg.admin.execute("DROP VIEW IF EXISTS v_pos")
        pg.admin.execute(f"DROP OWNED BY {owner}")
        pg.admin.execute(f"DROP ROLE {owner}")


@pytest.mark.postgres
def test_postgres_a_function_only_a_role_map_role_may_run_counts(
    pg: PgScratch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    role = f"{pg.reader}_m"  # the account cannot run it (NOINHERIT), the mapped role can
    pg.admin.execute(
        # NOINHERIT first: from PostgreSQL 16 it is only the default of the grants made after it
        f"ALTER ROLE {pg.reader} NOINHERIT; CREATE ROLE {role} NOLOGIN; GRANT {role} TO {pg.reader};"
        f" GRANT USAGE ON SCHEMA public TO {role};"
        f" GRANT SELECT (id, name) ON customers TO {role}; GRANT SELECT ON orders TO {role}"
    )
    try:
        pg.admin.execute(f"{ROUTES['f_attr'][0]} {AGG}")
        pg.admin.execute("REVOKE EXECUTE ON FUNCTION f_attr(orders) FROM PUBLIC")
        pg.admin.execute(f"GRANT EXECUTE ON FUNCTION f_attr(orders) TO {role}")
        roles = tmp_path / "roles.yaml"
        roles.write_text(f"principals:\n  alice: {role}\n", encoding="utf-8")
        masks = masks_file(tmp_path, "customers.email")
        code, out = _run(
            capsys, "sql", "doctor", "--dsn", pg.reader_url, "--mask", masks,
            "--role-map", str(roles), "--allow", "shared-login",
        )  # fmt: skip
        assert code != 0, out
        assert "function public.f_attr may answer in the scan order of a masked table" in out, out
    finally:
        pg.admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
