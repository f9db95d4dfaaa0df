"""The analysis budget: too large or too complex is refused before the expensive analysis, and a heavy
analysis never holds up other callers (through the real server and the official SDK client)."""

from __future__ import annotations

import importlib
import threading
from typing import Any

import anyio
import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import AnalysisBudget, admit
from mcpkit.sql.admission.parse import parse_statement
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.server import build_server
from mcpkit.sql.service import Masking, SqlService
from mcpkit.testing import connect
from tests.helpers import text_of
from tests.sql.sql_support import DbEnv

service_module = importlib.import_module("mcpkit.sql.service")
admit_module = importlib.import_module("mcpkit.sql.admission.admit")  # the package shadows its name


def _union(n: int, where: bool = True) -> str:
    branch = "SELECT id, notes FROM sales_demo" + (" WHERE id = {i}" if where else "")
    return " UNION ALL ".join(branch.format(i=i) for i in range(n))


def _masked_service(env: DbEnv, **kwargs: Any) -> SqlService:
    engine = SqlEngine(env.ro_url)
    schema = KnownSchema(reflect_schema(engine.sa_engine), engine.dialect)
    return SqlService(engine, masking=Masking(MaskPolicy.of(["sales_demo.notes"]), schema), **kwargs)


def test_the_1800_branch_union_is_refused_before_masking_analysis(
    sqlite_env: DbEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _masked_service(sqlite_env)
    analysed: list[str] = []
    monkeypatch.setattr("mcpkit.sql.service.plan_masking", lambda *a, **k: analysed.append("x"))
    try:
        with pytest.raises(Refused) as info:
            service.query(_union(1800, where=False), call_id="big")
    finally:
        service.engine.close()
    assert info.value.data == {"reason": "too_complex"}
    assert "analysis budget" in info.value.message and "at most" in info.value.message
    assert analysed == []


@pytest.mark.parametrize(
    ("budget", "sql", "said"),
    [
        (AnalysisBudget(max_branches=3), "SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4", "4 UNION"),
        (AnalysisBudget(max_selects=2), "SELECT (SELECT 1), (SELECT 2)", "3 SELECTs"),
        (AnalysisBudget(max_nodes=5), "SELECT a + b + c FROM t", "syntax nodes"),
        (AnalysisBudget(max_tokens=3), "SELECT a, b FROM t", "tokens"),
        (AnalysisBudget(seconds=-1), "SELECT 1", "too long to analyse"),
    ],
)
def test_each_limit_refuses_with_a_sentence(budget: AnalysisBudget, sql: str, said: str) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, "sqlite", budget=budget)
    assert info.value.data == {"reason": "too_complex"} and said in info.value.message


def test_the_limits_admit_what_analysts_write() -> None:
    sql = _union(60) + " ORDER BY 1"
    assert admit(sql, "postgres", limit=26).sql.endswith("LIMIT 26")


@pytest.mark.anyio
async def test_a_cheap_call_is_answered_while_a_heavy_analysis_runs(
    sqlite_env: DbEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _masked_service(sqlite_env)
    started = threading.Event()
    from mcpkit.sql import service as service_module

    real_plan = service_module.plan_masking

    def watched(*args: Any, **kwargs: Any) -> Any:
        if "UNION" in args[0].sql():
            started.set()
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(service_module, "plan_masking", watched)
    order: list[str] = []
    try:
        async with connect(build_server(service)) as client:

            async def heavy() -> None:
                result = await client.call_tool("execute_query", {"query": _union(99)})
                assert not result.is_error, text_of(result)
                order.append("heavy")

            async def cheap() -> None:
                await anyio.to_thread.run_sync(started.wait, 30.0)
                result = await client.call_tool("execute_query", {"query": "SELECT count(*) FROM sales_demo"})
                assert not result.is_error and "3000" in text_of(result)
                order.append("cheap")

            async with anyio.create_task_group() as tg:
                tg.start_soon(heavy)
                tg.start_soon(cheap)
    finally:
        service.engine.close()
    # The heavy call's masking analysis of 99 branches was running when the cheap call came in.
    assert started.is_set() and order == ["cheap", "heavy"]


# Just under the size limits as written; admission's guards then multiply the tree (red team
# rt19pg F12: 4-8 s of analysis on PostgreSQL, the second look and the masking analysis running
# over 8,000-15,000 nodes).
_OPERAND = (
    "coalesce(upper(region), lower(product), region, product, notes, 'x')"
    " || coalesce(upper(product), lower(region), 'y')"
)
_UNTIMED = AnalysisBudget(seconds=600)  # the size limits decide, not a shared host's wall clock
_MULTIPLIED = {
    "casts": " UNION ALL ".join(
        f"SELECT ({_OPERAND})::int, id, region, notes FROM sales_demo WHERE id = {i}" for i in range(60)
    ),
    "operands": "SELECT "
    + ", ".join(f"({_OPERAND} || '{i}')::int" for i in range(60))
    + ", notes FROM sales_demo",
}


@pytest.mark.parametrize("shape", sorted(_MULTIPLIED))
def test_guards_that_multiply_the_tree_are_refused_before_the_second_look(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = _MULTIPLIED[shape]
    AnalysisBudget().check_tree(parse_statement(sql, "postgres"))  # under the limits as written
    regenerated: list[str] = []
    real = admit_module._regenerate
    monkeypatch.setattr(admit_module, "_regenerate", lambda *a: regenerated.append("x") or real(*a))
    with pytest.raises(Refused) as info:
        admit(sql, "postgres", limit=501, budget=_UNTIMED)
    assert info.value.data == {"reason": "too_complex"}
    assert "once its searches, casts and builders are bounded" in info.value.message
    assert regenerated == []  # refused before the guarded text is written, read again and masked


@pytest.mark.anyio
async def test_on_postgres_a_multiplied_query_is_refused_while_another_client_is_answered(
    pg_env: DbEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients of one real server with masks: one sends a heavy query that is analysed (and
    held inside its masking analysis until the other is answered, which only a worker thread
    allows), then one whose guards multiply it, refused before the masking analysis."""
    service = _masked_service(pg_env, budget=_UNTIMED)
    heavy_started, cheap_answered = threading.Event(), threading.Event()
    analysed: list[int] = []
    real_plan = service_module.plan_masking

    def watched(tree: Any, *args: Any, **kwargs: Any) -> Any:
        analysed.append(sum(1 for _ in tree.walk()))
        if "UNION" in tree.sql():
            heavy_started.set()
            cheap_answered.wait(30.0)  # on the event loop this would hold the other client out
        return real_plan(tree, *args, **kwargs)

    monkeypatch.setattr(service_module, "plan_masking", watched)
    heavy_sql = " UNION ALL ".join(
        f"SELECT strpos({_OPERAND}, product), id, notes FROM sales_demo WHERE id = {i}" for i in range(30)
    )
    order: list[str] = []
    try:
        server = build_server(service)
        async with connect(server) as first, connect(server) as second:

            async def heavy() -> None:
                result = await first.call_tool("execute_query", {"query": heavy_sql})
                assert not result.is_error, text_of(result)
                order.append("heavy")

            async def cheap() -> None:
                await anyio.to_thread.run_sync(heavy_started.wait, 30.0)
                result = await second.call_tool("execute_query", {"query": "SELECT count(*) FROM sales_demo"})
                assert not result.is_error and "3000" in text_of(result), text_of(result)
                order.append("cheap")
                cheap_answered.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(heavy)
                tg.start_soon(cheap)
            assert order == ["cheap", "heavy"]
            before = len(analysed)
            refused = await second.call_tool("execute_query", {"query": _MULTIPLIED["casts"]})
    finally:
        service.engine.close()
    assert refused.is_error and (refused.meta or {})["mcpkit/error"]["data"] == {"reason": "too_complex"}
    # By its size once guarded, before the second look and its masking analysis (the old code spent
    # the whole 5 s deadline on them first, or answered after 4-8 s on a faster machine).
    assert "syntax nodes once its searches" in text_of(refused)
    assert len(analysed) == before and max(analysed) <= 12_000
