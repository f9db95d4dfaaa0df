"""A call of a function opted in by name reads the catalog first, whatever the check interval
(red team rt25 F3).

`--allow function:S.F` holds only while S.F names one function. An overload `S.F(int)` created
while serving ran once, within `--catalog-check-interval`, before the next catalog read refused
it. A call whose admitted query calls a function admitted by an opt-in alone now reads the
catalog fingerprint in its own transaction before its SQL, so the overload is refused on that call.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlglot
from mcp import Client, StdioServerParameters

from mcpkit.sql.admission import FunctionPolicy
from tests.helpers import ROOT, UNBOUNDED_MEMORY
from tests.sql.sql_support import PgScratch, pg_scratch

pytestmark = pytest.mark.anyio


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "rt25a") as db:
        db.admin.execute(
            f"""
            REVOKE ALL ON SCHEMA public FROM PUBLIC;
            CREATE SEQUENCE ov_seq;
            GRANT USAGE ON SCHEMA public TO {db.reader};
            GRANT USAGE ON SEQUENCE ov_seq TO {db.reader};
            CREATE FUNCTION f_ov() RETURNS text STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN 'read'; END $$;
            """
        )
        yield db


@asynccontextmanager
async def _serving(dsn: str, *extra: str) -> AsyncIterator[Callable[[str], Any]]:
    args = ["-m", "mcpkit", "sql", "serve", "--dsn", dsn, "--no-audit", *extra, *UNBOUNDED_MEMORY]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:

        async def ask(sql: str) -> Any:
            return await client.call_tool("execute_query", {"query": sql})

        yield ask


def _code(result: Any) -> str:
    return str((result.meta or {}).get("mcpkit/error", {}).get("code", "OK"))


def _calls(pg: PgScratch) -> int:
    row = pg.admin.execute("SELECT last_value, is_called FROM ov_seq").fetchone()
    assert row is not None
    return int(row[0]) + int(row[1])


@pytest.mark.postgres
async def test_postgres_an_overload_created_while_serving_never_runs_within_the_interval(
    pg: PgScratch,
) -> None:
    opt_in = ["--allow", "function:public.f_ov", "--catalog-check-interval", "3600"]
    async with _serving(pg.reader_url, *opt_in) as ask:
        for _ in range(3):  # the pooled connections have read the catalog: the interval holds
            assert _code(await ask("SELECT public.f_ov() AS r")) == "OK"
        pg.admin.execute(
            "CREATE FUNCTION f_ov(i int) RETURNS text STABLE LANGUAGE plpgsql SECURITY DEFINER"
            " AS $$ BEGIN RETURN nextval('ov_seq')::text; END $$"
        )
        before = _calls(pg)
        refused = await ask("SELECT public.f_ov(1) AS r")  # before: | 1 |, the overload ran
        assert _code(refused) == "SOURCE_UNVERIFIED", refused
        assert _calls(pg) == before
        assert _code(await ask("SELECT 1 AS one")) == "SOURCE_UNVERIFIED"  # the whole source is refused
        pg.admin.execute("DROP FUNCTION f_ov(int)")
        assert _code(await ask("SELECT public.f_ov() AS r")) == "OK"


def test_only_a_call_admitted_by_an_opt_in_alone_reads_the_catalog_first() -> None:
    policy = FunctionPolicy.for_dialect("postgres", extra=["public.f_ov", "g"])
    for sql, opted in (
        ("SELECT public.f_ov() AS r", True),
        ("SELECT g(1)", True),
        ("SELECT lower('A'), count(*) FROM t", False),
        ("SELECT other.f_ov()", False),
    ):
        assert policy.opted_in(sqlglot.parse_one(sql, read="postgres")) is opted, sql
