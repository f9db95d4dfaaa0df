"""What a new user meets in the first hour (issue 13): declared constraints hold, strict means strict,
optional fields list plainly, structured returns work without an output model, secrets never reach
the client, and an empty server does not build."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field

from mcpkit import Context, DefinitionError, Nullable, Server, Tool, ToolError, ToolResult, tool
from mcpkit.lint import lint_tools
from mcpkit.testing import connect
from tests.helpers import dump, text_of

pytestmark = pytest.mark.anyio

TOKEN = "tok-9f8e7d6c5b4a"


def error_code(result: Any) -> str | None:
    return (result.meta or {}).get("mcpkit/error", {}).get("code")


# --- Annotated metadata ------------------------------------------------------------------------


@tool()
def pick(
    n: Annotated[int, Field(ge=1, le=3, description="How many, 1 to 3")],
    code: Annotated[str, Field(max_length=3)] = "abc",
    note: Annotated[str, "A free note"] = "",
) -> str:
    """Pick n items."""
    return f"{n} {code} {note}"


async def test_annotated_constraints_validate_and_descriptions_reach_the_schema() -> None:
    server = Server("annotated", tools=[pick])
    props = server.list_tools()[0]["inputSchema"]["properties"]
    assert props["n"] == {"type": "integer", "minimum": 1, "maximum": 3, "description": "How many, 1 to 3"}
    assert props["code"]["maxLength"] == 3
    assert props["note"]["description"] == "A free note"
    async with connect(server) as client:
        ok = await client.call_tool("pick", {"n": 2})
        too_many = await client.call_tool("pick", {"n": 9})
        too_long = await client.call_tool("pick", {"n": 1, "code": "abcdef"})
    assert text_of(ok) == "2 abc "
    assert error_code(too_many) == "INVALID_PARAMS" and "n:" in text_of(too_many)
    assert error_code(too_long) == "INVALID_PARAMS" and "code:" in text_of(too_long)


# --- strict by default -------------------------------------------------------------------------


class Inner(BaseModel):
    city: str


class Plain(BaseModel):
    """No `extra` setting at all: the case the README's promise is about."""

    name: str
    where: Inner


def echo_name(args: Plain, ctx: Context) -> str:
    return args.name


def plain_tool(**options: Any) -> Tool:
    return Tool(name="plain", description="Echo a name.", input=Plain, handler=echo_name, **options)


ARGUMENT_SAMPLES: list[dict[str, Any]] = [
    {"name": "a", "where": {"city": "Oslo"}},
    {"name": "a", "where": {"city": "Oslo"}, "admin": True},
    {"name": "a", "where": {"city": "Oslo", "zip": "0150"}},
    {"name": "a"},
    {"name": 1, "where": {"city": "Oslo"}},
]


@pytest.mark.parametrize("strict", [True, False])
async def test_schema_and_validation_agree_on_unknown_arguments(strict: bool) -> None:
    server = Server("strict", tools=[plain_tool(strict=strict)])
    schema = server.list_tools()[0]["inputSchema"]
    validator = Draft202012Validator(schema)
    async with connect(server) as client:
        for arguments in ARGUMENT_SAMPLES:
            result = await client.call_tool("plain", arguments)
            assert validator.is_valid(arguments) == (not result.is_error), (arguments, text_of(result))
    if strict:
        assert schema["additionalProperties"] is False
        assert schema["properties"]["where"]["additionalProperties"] is False


async def test_strict_by_default_refuses_unknown_arguments_at_every_level() -> None:
    async with connect(Server("strict", tools=[plain_tool()])) as client:
        top = await client.call_tool("plain", {"name": "a", "where": {"city": "x"}, "admin": True})
        nested = await client.call_tool("plain", {"name": "a", "where": {"city": "x", "zip": "1"}})
    assert error_code(top) == "INVALID_PARAMS" and "admin" in text_of(top)
    assert error_code(nested) == "INVALID_PARAMS" and "where.zip" in text_of(nested)


def test_a_model_that_allows_extras_needs_the_explicit_opt_out() -> None:
    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int

    with pytest.raises(DefinitionError, match=r"Open \(extra='allow'\).*strict=False"):
        Tool(name="open", description="Open.", input=Open, handler=echo_name)
    loose = Tool(name="open", description="Open.", input=Open, handler=echo_name, strict=False)
    assert Server("s", tools=[loose]).list_tools()[0]["inputSchema"]["additionalProperties"] is True


# --- optional is not nullable ------------------------------------------------------------------


class Search(BaseModel):
    query: str
    city: str | None = None
    limit: Annotated[int | None, Field(ge=1, description="At most this many")] = None
    near: Inner | None = None
    note: Annotated[str | None, Nullable()] = None
    cursor: str | None = Field(description="Required, may be null")
    page: int | None = 1


def search(args: Search, ctx: Context) -> str:
    return f"{args.city}|{args.limit}|{args.near}"


async def test_optional_with_none_default_is_a_plain_property() -> None:
    server = Server("opt", tools=[Tool(name="search", description="Search.", input=Search, handler=search)])
    schema = server.list_tools()[0]["inputSchema"]
    props = schema["properties"]
    assert props["city"] == {"type": "string"}
    assert props["limit"] == {"type": "integer", "minimum": 1, "description": "At most this many"}
    assert props["near"]["type"] == "object" and "anyOf" not in props["near"]
    # null stays where the author means it
    assert {"type": "null"} in props["note"]["anyOf"]
    assert {"type": "null"} in props["cursor"]["anyOf"]
    assert {"type": "null"} in props["page"]["anyOf"]
    assert sorted(schema["required"]) == ["cursor", "query"]
    findings = lint_tools(server.list_tools(), profiles=["cursor"])
    assert not [f for f in findings if f.path.startswith(("/properties/city", "/properties/limit"))]
    async with connect(server) as client:
        left_out = await client.call_tool("search", {"query": "q", "cursor": None})
        sent_null = await client.call_tool("search", {"query": "q", "cursor": None, "city": None})
    assert text_of(left_out) == text_of(sent_null) == "None|None|None"


# --- structured results without an output model ------------------------------------------------


def as_tool_result(args: Inner, ctx: Context) -> ToolResult:
    return ToolResult(text=f"Order for {args.city}: ok", structured={"city": args.city, "items": 2})


def as_dict(args: Inner, ctx: Context) -> dict[str, Any]:
    return {"city": args.city, "items": [1, 2]}


def structured_only(args: Inner, ctx: Context) -> ToolResult:
    return ToolResult(structured=Inner(city=args.city))


async def test_structured_content_without_an_output_model() -> None:
    tools = [
        Tool(name=fn.__name__, description="Structured.", input=Inner, handler=fn)
        for fn in (as_tool_result, as_dict, structured_only)
    ]
    async with connect(Server("structured", tools=tools)) as client:
        first = await client.call_tool("as_tool_result", {"city": "Oslo"})
        second = await client.call_tool("as_dict", {"city": "Oslo"})
        third = await client.call_tool("structured_only", {"city": "Oslo"})
    assert not first.is_error and text_of(first) == "Order for Oslo: ok"
    assert first.structured_content == {"city": "Oslo", "items": 2}
    assert second.structured_content == {"city": "Oslo", "items": [1, 2]}
    assert text_of(second) == '{"city":"Oslo","items":[1,2]}'
    assert third.structured_content == {"city": "Oslo"} and text_of(third) == '{"city":"Oslo"}'


# --- secrets never reach the client ------------------------------------------------------------


class Mode(BaseModel):
    mode: str


async def leaky(args: Mode, ctx: Context) -> Any:
    token = ctx.require_secret("API_TOKEN")
    await ctx.notify_client("info", f"using {token}")
    if args.mode == "error":
        raise ToolError(f"The API refused token {token}.", data={"token": token})
    if args.mode == "text":
        return f"called with {token}"
    if args.mode == "dict":
        return {"auth": {"header": f"Bearer {token}"}, "list": [token]}
    return ToolResult(text="ok", structured={"echo": token})


async def test_declared_secret_values_are_scrubbed_from_everything_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    server = Server(
        "secrets",
        tools=[Tool(name="leaky", description="Leaks.", input=Mode, handler=leaky, secrets=["API_TOKEN"])],
        environ={"API_TOKEN": TOKEN},
    )
    notes: list[Any] = []

    async def on_log(params: Any) -> None:
        notes.append(params)

    async with connect(server, logging_callback=on_log) as client:
        results = [await client.call_tool("leaky", {"mode": m}) for m in ("error", "text", "dict", "result")]
    for result in results:
        wire = dump(result)
        assert TOKEN not in wire and "[REDACTED]" in wire
    assert results[0].is_error and text_of(results[0]) == "TOOL_ERROR: The API refused token [REDACTED]."
    assert notes and all(TOKEN not in str(n) for n in notes)


# --- a server needs tools ----------------------------------------------------------------------


def test_a_server_without_tools_does_not_build() -> None:
    with pytest.raises(DefinitionError, match="no tools"):
        Server("empty")
    with pytest.raises(DefinitionError, match="no tools"):
        Server("empty", tools=[])
    with pytest.raises(DefinitionError, match="leave no tool"):
        Server("narrowed", tools=[plain_tool(category="a")], denied_categories=["a"])
