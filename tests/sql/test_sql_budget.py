"""The analysis budget: too large or too complex is refused before the expensive analysis, and a heavy
analysis never holds up other callers (through the real server and the official SDK client)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import AnalysisBudget, admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.server import build_server
from mcpkit.sql.service import Masking, SqlService
from mcpkit.testing import connect
from tests.helpers import text_of
from tests.sql.sql_support import DbEnv


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
