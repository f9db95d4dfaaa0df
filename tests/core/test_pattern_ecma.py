"""A field's `pattern` is validated as the schema publishes it: ECMA-262 (red-team pass 2, item 8).

Before: `^\\d{3}$` was checked by pydantic's Rust regex, whose `\\d` and `\\w` are Unicode-aware, so
Arabic-Indic and fullwidth digits reached a handler whose schema promised three
ASCII digits, as every client compiling the pattern (`new RegExp(p, "u")`) reads it.
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from mcpkit import Context, Server, Tool, tool
from mcpkit.testing import connect
from tests.helpers import text_of

pytestmark = pytest.mark.anyio

Digits = Annotated[str, Field(pattern=r"^\d{3}$")]


@tool()
def lookup(code: Digits) -> str:
    """Look up a three-digit code."""
    return f"code={code}"


class Tag(BaseModel):
    name: Annotated[str, Field(pattern=r"^\w+$")]


class Order(BaseModel):
    codes: list[Digits] = Field(default_factory=list)
    tag: Tag | None = None
    note: Annotated[str | None, Field(pattern=r"^[a-z ]*$")] = None


def take(args: Order, ctx: Context) -> str:
    return "ok"


def _code(result: Any) -> str | None:
    return (result.meta or {}).get("mcpkit/error", {}).get("code")


async def test_d_means_ascii_digits_as_published() -> None:
    server = Server("patterns", tools=[lookup])
    assert server.list_tools()[0]["inputSchema"]["properties"]["code"]["pattern"] == r"^\d{3}$"
    async with connect(server) as client:
        ascii_digits = await client.call_tool("lookup", {"code": "123"})
        arabic_indic = await client.call_tool("lookup", {"code": "١٢٣"})
        fullwidth = await client.call_tool("lookup", {"code": "１２３"})
        devanagari = await client.call_tool("lookup", {"code": "१२३"})
    assert text_of(ascii_digits) == "code=123"
    for refused in (arabic_indic, fullwidth, devanagari):
        assert refused.is_error and _code(refused) == "INVALID_PARAMS"
        assert "code: does not match the pattern" in text_of(refused)


@pytest.mark.parametrize(
    ("arguments", "ok"),
    [
        ({"codes": ["123", "456"]}, True),
        ({"codes": ["123", "٤٥٦"]}, False),  # inside an array
        ({"tag": {"name": "hello_1"}}, True),
        ({"tag": {"name": "héllo"}}, False),  # ECMA-262 \w is [A-Za-z0-9_]
        ({"tag": {"name": "ｈｅｌｌｏ"}}, False),
        ({"note": "fine words"}, True),
        ({"note": None}, True),  # an optional field's null passes by the other branch
        ({"note": "Loud"}, False),
    ],
)
async def test_nested_and_optional_patterns(arguments: dict[str, Any], ok: bool) -> None:
    server = Server(
        "patterns", tools=[Tool(name="take", description="Take an order.", input=Order, handler=take)]
    )
    async with connect(server) as client:
        result = await client.call_tool("take", arguments)
    if ok:
        assert not result.is_error and text_of(result) == "ok", text_of(result)
    else:
        assert result.is_error and _code(result) == "INVALID_PARAMS", text_of(result)
