"""The API's shape (issue 13): the decorator, annotations, results' _meta, error data and retry
wording, the handler cache, find_tools' listing."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from mcpkit import Context, DefinitionError, Server, Tool, ToolAnnotations, ToolError, ToolResult, tool
from mcpkit.errors import InvalidParams, Refused, ToolTimeout
from mcpkit.testing import connect
from tests.helpers import text_of

pytestmark = pytest.mark.anyio


def meta_error(result: Any) -> dict[str, Any]:
    return dict((result.meta or {}).get("mcpkit/error", {}))


# --- the decorator ---------------------------------------------------------------------------


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


@tool("greet", category="people", rate_limit_per_min=30)
async def greeting(name: str, context: Context) -> str:
    """Greet someone."""
    return f"Hello {name} from {context.tool}"


class Point(BaseModel):
    x: int


@tool
def norm(p: Point, *, ctx: Context) -> dict[str, int]:
    """Norm of a point."""
    return {"norm": abs(p.x), "id": len(ctx.call_id)}


async def test_bare_and_called_decorator_context_by_annotation_and_the_name_stays_usable() -> None:
    assert add(1, 2) == 3 and add.name == "add" and add.description == "Add two integers."
    assert greeting.name == "greet" and greeting.category == "people"
    assert sorted(greeting.input.model_fields) == ["name"]  # the Context parameter is not an argument
    async with connect(Server("deco", tools=[add, greeting, norm])) as client:
        summed = await client.call_tool("add", {"a": 1})
        hello = await client.call_tool("greet", {"name": "Ann"})
        normed = await client.call_tool("norm", {"x": -3})
    assert text_of(summed) == "3"
    assert text_of(hello) == "Hello Ann from greet"
    assert normed.structured_content == {"norm": 3, "id": 32}


def test_decorator_options_are_checked() -> None:
    with pytest.raises(TypeError):
        tool(rate_limit=5)  # type: ignore[call-overload]
    with pytest.raises(DefinitionError, match=r"\*args"):

        @tool
        def spread(*items: int) -> int:
            """Sum."""
            return sum(items)


# --- annotations -----------------------------------------------------------------------------


def test_annotations_by_spec_or_python_names_and_typos_refused() -> None:
    camel = ToolAnnotations(readOnlyHint=False, destructiveHint=False)  # type: ignore[call-arg]
    snake = ToolAnnotations(read_only_hint=False, destructive_hint=False)
    assert camel == snake
    with pytest.raises(ValidationError, match="readonly"):
        ToolAnnotations(readonly=True)  # type: ignore[call-arg]
    server = Server(
        "ann", tools=[Tool(name="t", description="T.", input=Point, handler=norm.handler, annotations=camel)]
    )
    listed = server.list_tools()[0]["annotations"]
    assert listed["readOnlyHint"] is False and listed["destructiveHint"] is False


# --- results and errors ----------------------------------------------------------------------


class NotFound(ToolError):
    code = "NOT_FOUND"


class Mode(BaseModel):
    mode: str


async def outcomes(args: Mode, ctx: Context) -> Any:
    if args.mode == "meta":
        return ToolResult(text="ok", meta={"acme.com/trace": "t-1"})
    if args.mode == "hidden":
        raise ToolError("The upstream refused.", data={"upstream_body": "internal detail"})
    if args.mode == "shown":
        raise ToolError("Pick another slot.", data={"free": ["10:00"]}, expose_data=True)
    if args.mode == "custom":
        raise NotFound("No such order.")
    raise ToolError("The service is busy.", retryable=True)


async def test_meta_error_data_custom_codes_and_retry_wording(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpkit.calls")
    server = Server("results", tools=[Tool(name="o", description="Outcomes.", input=Mode, handler=outcomes)])
    async with connect(server) as client:
        meta, hidden, shown, custom, busy = [
            await client.call_tool("o", {"mode": m}) for m in ("meta", "hidden", "shown", "custom", "busy")
        ]
    assert (meta.meta or {})["acme.com/trace"] == "t-1" and "mcpkit/callId" in (meta.meta or {})
    assert "data" not in meta_error(hidden) and "internal detail" not in str(hidden)
    records = [r.call for r in caplog.records if hasattr(r, "call")]  # type: ignore[attr-defined]
    assert records[1]["error_data"] == {"upstream_body": "internal detail"}  # the operator has it
    assert meta_error(shown)["data"] == {"free": ["10:00"]}
    assert text_of(custom) == "NOT_FOUND: No such order." and meta_error(custom)["code"] == "NOT_FOUND"
    assert text_of(busy) == "TOOL_ERROR: The service is busy. Retrying later may succeed."
    assert text_of(hidden) == "TOOL_ERROR: The upstream refused."


class Conflict(Refused):  # an author's subclass of one of mcpkit's own errors
    code = "CONFLICT"


class Vendored(ToolError):  # an error class defined inside an mcpkit.* module, unmarked
    __module__ = "mcpkit.vendored"
    code = "VENDORED"


class Public(ToolError):  # its author marks the whole class public
    code = "PUBLIC"
    expose_data = True


class Which(BaseModel):
    which: str


async def raising(args: Which, ctx: Context) -> str:
    detail = {"upstream_body": "internal detail"}
    errors: dict[str, ToolError] = {
        "refused": Refused("No.", data=detail),
        "invalid": InvalidParams("Bad.", data=detail),
        "timeout": ToolTimeout("Late.", data=detail),
        "conflict": Conflict("Taken.", data=detail),
        "vendored": Vendored("Odd.", data=detail),
        "public": Public("Shown.", data={"free": 2}),
        "marked": Refused("Marked.", data={"free": 1}, expose_data=True),
    }
    raise errors[args.which]


async def test_error_data_is_private_unless_its_author_marks_it(caplog: pytest.LogCaptureFixture) -> None:
    """Only data an author explicitly marked public reaches the model, whatever class or module
    raised it; mcpkit marks its own stable reasons where it builds them (a rate limit's wait)."""
    caplog.set_level(logging.INFO, logger="mcpkit.calls")
    server = Server(
        "private",
        tools=[
            Tool(name="r", description="Raise.", input=Which, handler=raising),
            Tool(name="n", description="Limited.", input=Which, handler=raising, rate_limit_per_min=1),
        ],
    )
    hidden = ("refused", "invalid", "timeout", "conflict", "vendored")
    async with connect(server) as client:
        results = {w: await client.call_tool("r", {"which": w}) for w in (*hidden, "public", "marked")}
        await client.call_tool("n", {"which": "public"})
        limited = await client.call_tool("n", {"which": "public"})
    for which in hidden:
        assert results[which].is_error and "data" not in meta_error(results[which]), which
        assert "internal detail" not in str(results[which])
    assert meta_error(results["public"])["data"] == {"free": 2}
    assert meta_error(results["marked"])["data"] == {"free": 1}
    assert meta_error(limited)["code"] == "RATE_LIMITED" and "retry_after_s" in meta_error(limited)["data"]
    records = [r.call for r in caplog.records if hasattr(r, "call")]  # type: ignore[attr-defined]
    assert sum(r.get("error_data") == {"upstream_body": "internal detail"} for r in records) == len(hidden)


def test_custom_codes_are_checked() -> None:
    with pytest.raises(DefinitionError, match="UPPER_CASE"):

        class Lower(ToolError):
            code = "not_found"

    with pytest.raises(DefinitionError, match="reserved"):

        class Internal(ToolError):
            code = "INTERNAL"


# --- the handler cache -----------------------------------------------------------------------


class Key(BaseModel):
    name: str


computed: list[str] = []


async def skills(args: Key, ctx: Context) -> Any:
    async def load() -> list[str]:
        computed.append(args.name)
        return [args.name, "sql"]

    value = await ctx.cache.get_or_compute(f"skill-{args.name}", 300, load)
    return {"skills": value}


async def forget(args: Key, ctx: Context) -> str:
    dropped = await ctx.cache.invalidate(args.name)
    return f"{dropped.count}: {', '.join(dropped.keys)}"


async def test_ctx_cache_get_or_compute_and_invalidation_that_says_what_it_matched() -> None:
    server = Server(
        "cache",
        tools=[
            Tool(name="skills", description="Skills.", input=Key, handler=skills),
            Tool(name="forget", description="Forget.", input=Key, handler=forget, mutating=True),
        ],
    )
    async with connect(server) as client:
        first = await client.call_tool("skills", {"name": "py"})
        again = await client.call_tool("skills", {"name": "py"})
        await client.call_tool("skills", {"name": "go"})
        dropped = await client.call_tool("forget", {"name": "skill-*"})
        none = await client.call_tool("forget", {"name": "nothing-*"})
        await client.call_tool("skills", {"name": "py"})
    assert first.structured_content == again.structured_content == {"skills": ["py", "sql"]}
    assert computed == ["py", "go", "py"]
    assert text_of(dropped) == "2: skill-go, skill-py" and text_of(none) == "0: "
    with pytest.raises(TypeError):
        await server.data_cache.get_or_compute("k", 10, lambda: object())


# --- find_tools ------------------------------------------------------------------------------


async def test_find_tools_lists_matches_as_tools_list_does() -> None:
    server = Server("finder", tools=[add, greeting], find_tools=True)
    async with connect(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        found = await client.call_tool("find_tools", {"query": "add integers"})
    match = (found.structured_content or {})["tools"][0]
    assert match["name"] == "add"
    assert match["inputSchema"] == listed["add"].input_schema
    assert "input_schema" not in match
