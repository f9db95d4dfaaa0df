"""The public middleware chain: what a middleware sees, where it runs, and the built-ins on it."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation
from pydantic import BaseModel

from mcpkit import Call, CallNext, Context, Outcome, RateLimited, Refused, Server, Tool
from mcpkit.testing import connect
from tests.helpers import text_of

pytestmark = pytest.mark.anyio


class Q(BaseModel):
    q: str = "x"


async def answer(args: Q, ctx: Context) -> str:
    return f"{args.q} via {ctx.state.get('route', 'default')}"


def tools(**options: Any) -> list[Tool]:
    return [Tool(name="ask", description="Answer.", input=Q, handler=answer, **options)]


class DailyQuota:
    """The docs' example: a per-principal quota (callers without a principal share their client's)."""

    def __init__(self, per_day: int) -> None:
        self.per_day = per_day
        self.used: Counter[str] = Counter()

    async def __call__(self, call: Call, call_next: CallNext) -> Outcome:
        who = call.principal or call.identity
        if self.used[who] >= self.per_day:
            raise RateLimited(3600, "Today's quota is used up; try again tomorrow.")
        self.used[who] += 1
        call.record["quota_left"] = self.per_day - self.used[who]
        return await call_next(call)


def client(server: Server, who: str) -> Client:
    return Client(server.lowlevel, mode="legacy", client_info=Implementation(name=who, version="1"))


async def test_a_per_principal_quota_as_middleware(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpkit.calls")
    server = Server("quota", tools=tools(), middleware=[DailyQuota(per_day=2)])
    async with client(server, "alice") as alice, client(server, "bob") as bob:
        a = [await alice.call_tool("ask", {}) for _ in range(3)]
        b = await bob.call_tool("ask", {})
    assert [r.is_error for r in a] == [False, False, True]
    assert text_of(a[2]) == "RATE_LIMITED: Today's quota is used up; try again tomorrow."
    assert not b.is_error
    records = [r.call for r in caplog.records if hasattr(r, "call")]  # type: ignore[attr-defined]
    assert [rec.get("quota_left") for rec in records[:2]] == [1, 0]


async def test_what_a_middleware_sees_and_shares_with_the_handler() -> None:
    seen: list[dict[str, Any]] = []

    async def observe(call: Call, call_next: CallNext) -> Outcome:
        seen.append(
            {
                "name": call.name,
                "arguments": dict(call.arguments),
                "tool": call.tool.name if call.tool else None,
                "args": call.args,
                "principal": call.principal,
                "groups": call.groups,
                "client": call.client.name if call.client else None,
                "call_id": len(call.call_id),
            }
        )
        call.state["route"] = "replica-2"
        try:
            result = await call_next(call)
        except Exception as exc:
            seen[-1]["raised"] = type(exc).__name__
            raise
        seen[-1]["outcome"] = result.code or "OK"
        return result

    server = Server("observed", tools=tools(), middleware=[observe])
    async with connect(server) as c:
        ok = await c.call_tool("ask", {"q": "hi"})
        invalid = await c.call_tool("ask", {"q": 1})
        with pytest.raises(MCPError):
            await c.call_tool("nope", {})
    assert text_of(ok) == "hi via replica-2"
    assert invalid.is_error
    assert seen[0] == {
        "name": "ask",
        "arguments": {"q": "hi"},
        "tool": "ask",
        "args": None,
        "principal": None,
        "groups": (),
        "client": "mcp",
        "call_id": 32,
        "outcome": "OK",
    }
    assert seen[1]["raised"] == "InvalidParams"
    assert seen[2]["tool"] is None and seen[2]["raised"] == "UnknownTool"  # an audit sees unknown tools


async def test_middleware_runs_in_order_may_answer_or_rewrite_and_is_masked() -> None:
    order: list[str] = []

    def named(label: str) -> Any:
        async def mw(call: Call, call_next: CallNext) -> Outcome:
            order.append(label)
            return await call_next(call)

        return mw

    async def short_circuit(call: Call, call_next: CallNext) -> Outcome:
        if call.arguments.get("q") == "stop":
            return Outcome(text="stopped early")
        if call.arguments.get("q") == "refuse":
            raise Refused("Not for you.")
        if call.arguments.get("q") == "boom":
            raise RuntimeError("middleware bug with secret detail")
        call.arguments = {"q": str(call.arguments.get("q", "")).upper()}
        return await call_next(call)

    server = Server("ordered", tools=tools(), middleware=[named("outer"), named("inner"), short_circuit])
    async with connect(server) as c:
        stopped = await c.call_tool("ask", {"q": "stop"})
        refused = await c.call_tool("ask", {"q": "refuse"})
        boom = await c.call_tool("ask", {"q": "boom"})
        rewritten = await c.call_tool("ask", {"q": "hey"})
    assert order == ["outer", "inner"] * 4
    assert text_of(stopped) == "stopped early"
    assert text_of(refused) == "REFUSED: Not for you."
    assert boom.is_error and "secret detail" not in text_of(boom)
    assert text_of(rewritten) == "HEY via default"


async def test_a_cache_hit_spends_no_rate_limit() -> None:
    calls = Counter[str]()

    async def counted(args: Q, ctx: Context) -> str:
        calls[args.q] += 1
        return args.q

    tool = Tool(
        name="ask", description="Answer.", input=Q, handler=counted, cache_ttl_s=60, rate_limit_per_min=2
    )
    server = Server("cache-before-limit", tools=[tool])
    async with connect(server) as c:
        same = [await c.call_tool("ask", {"q": "a"}) for _ in range(5)]
        other = [await c.call_tool("ask", {"q": q}) for q in ("b", "c")]
    assert [r.is_error for r in same] == [False] * 5 and calls["a"] == 1
    assert [r.is_error for r in other] == [False, True]  # "a" spent one, "b" the other


def test_middleware_must_be_callables() -> None:
    from mcpkit import DefinitionError

    with pytest.raises(DefinitionError, match="middleware"):
        Server("bad", tools=tools(), middleware=["audit"])  # type: ignore[list-item]
