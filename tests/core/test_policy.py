"""Policy under real concurrency: rate limits and the cache, in memory and shared through the real Redis."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator

import anyio
import pytest
from mcp import Client
from mcp_types import Implementation
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from mcpkit import Call, CallNext, Context, Outcome, Server, Tool, ToolError
from mcpkit.cache import RedisCache
from tests.helpers import dump, text_of

pytestmark = pytest.mark.anyio


class Q(BaseModel):
    model_config = ConfigDict(extra="forbid")
    q: str = Field("x", description="Query")


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    async def slow(self, args: Q, ctx: Context) -> str:
        self.calls += 1
        await anyio.sleep(0.2)
        return f"answer to {args.q} #{self.calls}"

    async def fail(self, args: Q, ctx: Context) -> str:
        self.calls += 1
        raise ToolError("No.")

    async def write(self, args: Q, ctx: Context) -> str:
        return "written"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def limited_server(name: str, per_min: int, **kw: object) -> Server:
    tool = Tool(
        name="ping", description="Ping.", input=Q, handler=lambda a, c: "pong", rate_limit_per_min=per_min
    )
    return Server(name, tools=[tool], **kw)  # type: ignore[arg-type]


def cached_server(counter: Counter, name: str | None = None, **kw: object) -> Server:
    tools = [
        Tool(
            name="lookup",
            description="Slow lookup.",
            input=Q,
            handler=counter.slow,
            cache_ttl_s=30,
            category="db",
        ),
        Tool(name="short", description="Short-lived.", input=Q, handler=counter.slow, cache_ttl_s=0.3),
        Tool(name="failing", description="Fails.", input=Q, handler=counter.fail, cache_ttl_s=30),
        Tool(
            name="write", description="Writes.", input=Q, handler=counter.write, mutating=True, category="db"
        ),
    ]
    return Server(name or unique("cache"), tools=tools, **kw)  # type: ignore[arg-type]


def client(server: Server, who: str = "agent") -> Client:
    return Client(server.lowlevel, mode="legacy", client_info=Implementation(name=who, version="1"))


async def burst(c: Client, name: str, n: int, args: dict[str, object] | None = None) -> list[object]:
    results: list[object] = [None] * n

    async def one(i: int) -> None:
        results[i] = await c.call_tool(name, args or {})

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return results


def codes(results: list[object]) -> list[str]:
    return [(r.meta or {}).get("mcpkit/error", {}).get("code", "OK") for r in results]  # type: ignore[attr-defined]


# --- rate limits ------------------------------------------------------------------------------


async def test_limit_holds_exactly_under_concurrency_and_per_caller() -> None:
    server = limited_server(unique("rl"), 5)
    async with client(server, "alice") as alice, client(server, "bob") as bob:
        a = await burst(alice, "ping", 20)
        b = await burst(bob, "ping", 3)
    assert codes(a).count("OK") == 5
    assert codes(a).count("RATE_LIMITED") == 15
    assert codes(b) == ["OK"] * 3  # bob has his own budget
    limited = next(r for r in a if r.is_error)  # type: ignore[attr-defined]
    error = limited.meta["mcpkit/error"]
    assert error["retryable"] is True
    assert 1 <= error["data"]["retry_after_s"] <= 60
    assert f"retry in {error['data']['retry_after_s']} s" in text_of(limited)


async def test_server_default_limit_applies_to_tools_without_one() -> None:
    tool = Tool(name="free", description="No own limit.", input=Q, handler=lambda a, c: "ok")
    server = Server(unique("rl"), tools=[tool], rate_limit_per_min=2)
    async with client(server) as c:
        assert codes(await burst(c, "free", 4)).count("OK") == 2


async def _as_alice(call: Call, call_next: CallNext) -> Outcome:
    """What HTTP auth does: the same principal, whichever replica answers (in-memory has no auth)."""
    call.identity = "alice"
    return await call_next(call)


@pytest.mark.redis
async def test_two_replicas_share_one_limit_through_redis(redis_url: str) -> None:
    name = unique("rl-shared")
    one, two = (limited_server(name, 7, redis_url=redis_url, middleware=[_as_alice]) for _ in range(2))
    async with client(one) as c1, client(two) as c2:
        results: dict[str, list[object]] = {}

        async def run(label: str, c: Client) -> None:
            results[label] = await burst(c, "ping", 10)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "one", c1)
            tg.start_soon(run, "two", c2)
    all_codes = codes(results["one"]) + codes(results["two"])
    assert all_codes.count("OK") == 7
    assert codes(results["one"]).count("OK") > 0
    assert codes(results["two"]).count("OK") > 0


@pytest.mark.parametrize(("choice", "expected"), [("refuse", "RATE_LIMITED"), ("allow", "OK")])
async def test_unreachable_store_follows_the_limits_choice(choice: str, expected: str) -> None:
    server = limited_server(unique("rl-down"), 5, redis_url="redis://127.0.0.1:1/0", on_limit_outage=choice)
    async with client(server) as c:
        result = await c.call_tool("ping", {})
    assert codes([result]) == [expected]


# --- cache ------------------------------------------------------------------------------------


def _without_meta(result: object) -> dict[str, object]:
    wire = json.loads(dump(result))
    wire.pop("_meta", None)
    return wire


async def test_concurrent_identical_calls_compute_once_and_cached_results_are_identical() -> None:
    counter = Counter()
    server = cached_server(counter)
    async with client(server) as c:
        first = await burst(c, "lookup", 10, {"q": "a"})
        later = await c.call_tool("lookup", {"q": "a"})
        other = await c.call_tool("lookup", {"q": "b"})
    assert counter.calls == 2
    fresh = [r for r in first if not r.meta["mcpkit/cached"]]  # type: ignore[attr-defined]
    assert len(fresh) == 1
    assert later.meta["mcpkit/cached"] is True  # type: ignore[index]
    assert all(_without_meta(r) == _without_meta(fresh[0]) for r in [*first, later])
    assert text_of(other) == "answer to b #2"


async def test_cache_is_per_caller_expires_and_skips_errors() -> None:
    counter = Counter()
    server = cached_server(counter)
    async with client(server, "alice") as alice, client(server, "bob") as bob:
        await alice.call_tool("lookup", {"q": "a"})
        await bob.call_tool("lookup", {"q": "a"})
        assert counter.calls == 2
        await alice.call_tool("short", {})
        await anyio.sleep(0.5)
        await alice.call_tool("short", {})
        assert counter.calls == 4
        for _ in range(2):
            assert (await alice.call_tool("failing", {})).is_error
        assert counter.calls == 6


async def test_invalidate_and_mutating_tools_drop_their_category() -> None:
    counter = Counter()
    server = cached_server(counter)
    async with client(server) as c:
        await c.call_tool("lookup", {"q": "a"})
        await c.call_tool("lookup", {"q": "a"})
        assert counter.calls == 1
        assert await server.invalidate("look*") == 1
        await c.call_tool("lookup", {"q": "a"})
        assert counter.calls == 2
        await c.call_tool("write", {})
        await c.call_tool("lookup", {"q": "a"})
        assert counter.calls == 3


@pytest.mark.redis
async def test_redis_cache_is_shared_by_replicas_and_computes_once(redis_url: str) -> None:
    counter = Counter()
    name = unique("cache-shared")
    one, two = (
        cached_server(counter, name, redis_url=redis_url, middleware=[_as_alice]),
        cached_server(counter, name, redis_url=redis_url, middleware=[_as_alice]),
    )
    async with client(one) as c1, client(two) as c2:
        results: list[object] = []

        async def run(c: Client) -> None:
            results.extend(await burst(c, "lookup", 5, {"q": "shared"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, c1)
            tg.start_soon(run, c2)
        after = await c2.call_tool("lookup", {"q": "shared"})
        assert counter.calls == 1
        assert after.meta["mcpkit/cached"] is True  # type: ignore[index]
        assert all(_without_meta(r) == _without_meta(after) for r in results)
        assert await one.invalidate("lookup") == 1
        await c1.call_tool("lookup", {"q": "shared"})
        assert counter.calls == 2


async def test_a_replica_that_wins_the_lock_after_the_value_landed_does_not_compute_again(
    redis_url: str,
) -> None:
    """Its first read missed; by the time it took the lock the other replica had stored and let go."""
    one, two = RedisCache(redis_url), RedisCache(redis_url)
    key = unique("cache-late-lock")
    computed: list[str] = []

    async def compute(who: str) -> tuple[bytes, bool]:
        computed.append(who)
        return who.encode(), True

    real_get = two.redis.get
    reads = 0

    async def first_read_misses(name: str) -> object:
        nonlocal reads
        reads += 1
        if reads == 1:  # the read that raced the other replica's write
            await one.get_or_compute(key, 30, lambda: compute("one"))
            return None
        return await real_get(name)

    two.redis.get = first_read_misses  # type: ignore[method-assign]
    try:
        value, cached = await two.get_or_compute(key, 30, lambda: compute("two"))
        assert (value, cached, computed) == (b"one", True, ["one"])
    finally:
        await one.invalidate(key)
        await one.redis.aclose()
        await two.redis.aclose()


# --- find_tools -------------------------------------------------------------------------------


async def test_find_tools_reaches_tools_beyond_the_list_limit() -> None:
    names = [f"tool_{i}" for i in range(10)]
    tools = [Tool(name=n, description=f"Does thing {n}.", input=Q, handler=lambda a, c: "ok") for n in names]
    tools.append(
        Tool(
            name="refund_invoice",
            description="Refund a paid invoice to the customer.",
            input=Q,
            handler=lambda a, c: "refunded",
            keywords=("billing", "money back"),
        )
    )
    server = Server(unique("finder"), tools=tools, find_tools=True, list_limit=4)
    async with client(server) as c:
        listed = [t.name for t in (await c.list_tools()).tools]
        found = await c.call_tool("find_tools", {"query": "give the customer their money back"})
        called = await c.call_tool("refund_invoice", {})
    assert listed == ["tool_0", "tool_1", "tool_2", "find_tools"]
    hits = found.structured_content["tools"]  # type: ignore[index]
    assert hits[0]["name"] == "refund_invoice"
    assert hits[0]["inputSchema"]["type"] == "object"
    assert text_of(called) == "refunded"


# --- secrets and the operator log -------------------------------------------------------------

SECRET = "s3cr3t-Value-9f8e7d"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Everything the root logger's handlers write while the test runs."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


async def test_secrets_never_reach_logs_results_or_errors(
    captured: io.StringIO, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("API_TOKEN", SECRET)

    async def leaky(args: Q, ctx: Context) -> str:
        token = ctx.require_secret("API_TOKEN")
        ctx.log.info("calling upstream with %s", token)
        ctx.log.warning("header Authorization: Bearer %s", token)
        raise RuntimeError(f"upstream rejected token {token}")

    async def missing(args: Q, ctx: Context) -> str:
        return ctx.require_secret("MISSING_KEY")

    async def undeclared(args: Q, ctx: Context) -> str:
        return ctx.secret("HOME") or ""

    server = Server(
        unique("secrets"),
        tools=[
            Tool(name="leaky", description="Leaks.", input=Q, handler=leaky, secrets=("API_TOKEN",)),
            Tool(
                name="missing", description="Needs a key.", input=Q, handler=missing, secrets=("MISSING_KEY",)
            ),
            Tool(name="undeclared", description="Reads what it may not.", input=Q, handler=undeclared),
        ],
    )
    async with client(server) as c:
        leaked = await c.call_tool("leaky", {"q": SECRET})
        needs = await c.call_tool("missing", {})
        sneaky = await c.call_tool("undeclared", {})
    everything = captured.getvalue() + dump(leaked) + dump(needs) + dump(sneaky)
    assert SECRET not in everything
    assert "[REDACTED]" in captured.getvalue()
    assert "Traceback" in captured.getvalue()  # the operator still gets the traceback, redacted
    assert text_of(needs).startswith("TOOL_ERROR: The secret MISSING_KEY is not configured")
    assert "environment variable MISSING_KEY" in text_of(needs)
    assert sneaky.meta["mcpkit/error"]["code"] == "INTERNAL"  # type: ignore[index]


async def test_operator_record_masks_declared_secret_arguments(captured: io.StringIO) -> None:
    # Only what the tool declares (SecretStr): names are not guessed, so `author`/`keyword` stay.
    class Login(BaseModel):
        user: str
        password: SecretStr
        author: str = ""
        keyword: str = ""

    server = Server(
        unique("args"),
        tools=[Tool(name="login", description="Log in.", input=Login, handler=lambda a, c: "ok")],
    )
    async with client(server) as c:
        args = {"user": "ann", "password": "hunter2-long", "author": "Ann Author", "keyword": "widgets"}
        await c.call_tool("login", args)
    line = next(ln for ln in captured.getvalue().splitlines() if '"tool": "login"' in ln)
    record = json.loads(line[line.index("{") :])
    assert json.loads(record["arguments"]) == {**args, "password": "[REDACTED]"}
    assert "hunter2" not in captured.getvalue()
