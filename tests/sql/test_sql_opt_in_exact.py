"""Signature and name opt-ins name exactly one function, as PostgreSQL reads the name (red team
rt24 F1, F2, F6): no case or quote folding, an unqualified type is the one the search_path finds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpkit.cli import main
from mcpkit.sql.errors import SqlConfigError
from tests.sql.sql_support import PgScratch, pg_scratch

SET = "IMMUTABLE SET max_parallel_workers_per_gather = 4 BEGIN ATOMIC SELECT 1; END"


def _doctor(capsys: pytest.CaptureFixture[str], pg: PgScratch, *allow: str) -> str:
    argv = ["sql", "doctor", "--dsn", pg.reader_url]
    for a in allow:
        argv += ["--allow", a]
    try:
        main(argv)
    except SqlConfigError as exc:
        return str(exc)
    out = capsys.readouterr()
    return out.out + out.err


def _failing(out: str, what: str) -> bool:
    return any(line.startswith("fail") and what in line for line in out.splitlines())


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "optexact") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            CREATE SCHEMA a; CREATE SCHEMA b; CREATE SCHEMA "a.b";
            GRANT USAGE ON SCHEMA a, b, "a.b" TO {db.reader};
            CREATE TYPE a.t AS (x int); CREATE TYPE b.t AS (x int); CREATE TYPE a."T" AS (x int);
            """
        )
        yield db


@pytest.mark.postgres
def test_postgres_a_signature_opt_in_does_not_fold_case_or_quotes(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"CREATE FUNCTION public.h(v a.t) RETURNS int LANGUAGE sql {SET};"
        f' CREATE FUNCTION public.h(v a."T") RETURNS int LANGUAGE sql {SET};'
        f" CREATE FUNCTION public.w(v character) RETURNS int LANGUAGE sql {SET};"
        f' CREATE FUNCTION public.w(v "char") RETURNS int LANGUAGE sql {SET};'
    )
    out = _doctor(capsys, pg, "function-config:public.h(a.t)", "function-config:public.w(character)")
    assert _failing(out, 'public.h(a."T")') and _failing(out, 'public.w("char")'), out
    assert not _failing(out, "public.h(a.t)") and not _failing(out, "public.w(character)"), out
    out = _doctor(
        capsys, pg, *(f"function-config:public.{s}" for s in ("h(a.t)", 'h(a."T")', "w(bpchar)", 'w("char")'))
    )
    assert "fail least privilege" not in out, out


@pytest.mark.postgres
def test_postgres_an_unqualified_type_is_the_search_paths_or_refuses(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f"CREATE FUNCTION public.g(v a.t) RETURNS int LANGUAGE sql {SET};"
        f" CREATE FUNCTION public.g(v b.t) RETURNS int LANGUAGE sql {SET};"
    )
    out = _doctor(capsys, pg, "function-config:public.g(t)")
    assert _failing(out, "--allow function-config:public.g(t) names no function"), out
    assert _failing(out, "public.g(a.t)") and _failing(out, "public.g(b.t)"), out
    pg.admin.execute(f"ALTER ROLE {pg.reader} SET search_path = a, public")
    out = _doctor(capsys, pg, "function-config:public.g(t)")
    assert not _failing(out, "names no function") and not _failing(out, "public.g(a.t)"), out
    assert _failing(out, "public.g(b.t)"), out


@pytest.mark.postgres
def test_postgres_a_name_opt_in_is_read_as_postgres_reads_the_name(
    pg: PgScratch, capsys: pytest.CaptureFixture[str]
) -> None:
    pg.admin.execute(
        f'CREATE FUNCTION a."b.c"() RETURNS int LANGUAGE sql {SET};'
        f' CREATE FUNCTION "a.b".c() RETURNS int LANGUAGE sql {SET};'
    )
    out = _doctor(capsys, pg, "function-config:a.b.c")
    assert _failing(out, 'a."b.c"()') and _failing(out, '"a.b".c()'), out
    assert '(or --allow function-config:a."b.c")' in out, out
    out = _doctor(capsys, pg, 'function-config:a."b.c"')
    assert not _failing(out, 'a."b.c"()') and _failing(out, '"a.b".c()'), out
