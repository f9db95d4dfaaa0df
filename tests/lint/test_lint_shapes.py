"""Schemas that real frameworks emit, generated for real and linted: FastMCP 4.2 and the official SDK.

Optional fields become `anyOf` with `null`; nested Pydantic models become `$defs` + `$ref` (the SDK
always, FastMCP only when the model is recursive).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel, Field

from mcpkit.lint import fix_tools, lint_tools
from tests.lint.lint_support import ALL_PROFILES


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")


class Node(BaseModel):
    name: str
    children: list[Node] = []


def ship(
    order_id: str, address: Address, note: str | None = None, tags: list[str] | None = None
) -> dict[str, str]:
    """Ship an order to an address."""
    return {"order_id": order_id}


def walk_tree(root: Node) -> list[str]:
    """List the names in a tree."""
    return [root.name]


def _dump(tools: list[Any]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


@pytest.fixture(scope="module")
def fastmcp_tools() -> list[dict[str, Any]]:
    fastmcp = pytest.importorskip("fastmcp")
    server = fastmcp.FastMCP("shapes")
    server.tool(ship)
    server.tool(walk_tree)

    async def listing() -> list[dict[str, Any]]:
        async with fastmcp.Client(server) as client:
            return _dump(await client.list_tools())

    return anyio.run(listing)


@pytest.fixture(scope="module")
def sdk_tools() -> list[dict[str, Any]]:
    import mcp
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk-shapes")
    server.tool()(ship)
    server.tool()(walk_tree)

    async def listing() -> list[dict[str, Any]]:
        async with mcp.Client(server, mode="legacy") as client:
            return _dump((await client.list_tools()).tools)

    return anyio.run(listing)


def _by_tool(found: list[Any]) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for f in found:
        out.setdefault(f.tool, set()).add((f.rule, f.severity))
    return out


def test_fastmcp_shapes_are_what_we_lint(fastmcp_tools: list[dict[str, Any]]) -> None:
    ship_schema = next(t for t in fastmcp_tools if t["name"] == "ship")["inputSchema"]
    assert ship_schema["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "$ref" not in str(ship_schema)  # FastMCP inlines non-recursive models
    tree_schema = next(t for t in fastmcp_tools if t["name"] == "walk_tree")["inputSchema"]
    assert "$defs" in tree_schema  # ... but keeps recursive ones


def test_fastmcp_default_profiles(fastmcp_tools: list[dict[str, Any]]) -> None:
    found = lint_tools(fastmcp_tools)
    by_tool = _by_tool(found)
    # Optional fields: Cursor's gateway has rejected anyOf anywhere (a warning below the root).
    assert ("SL020", "warning") in by_tool["ship"]
    assert [f.path for f in found if f.tool == "ship" and f.rule == "SL020"] == [
        "/inputSchema/properties/note/anyOf",
        "/inputSchema/properties/tags/anyOf",
    ]
    assert not any(sev == "error" for _, sev in by_tool["ship"])
    # The recursive model: local refs Cursor is reported both failing on and resolving (a warning),
    # and a recursion nobody can inline.
    tree = [(f.rule, f.severity, f.clients) for f in found if f.tool == "walk_tree" and f.rule == "SL009"]
    assert ("SL009", "warning", ("cursor",)) in tree
    assert any("recursive" in f.message for f in found if f.tool == "walk_tree")


def test_fastmcp_strict_targets(fastmcp_tools: list[dict[str, Any]]) -> None:
    found = lint_tools(fastmcp_tools, profiles=["openai-strict", "gemini"])
    rules = {(f.tool, f.rule) for f in found}
    # Optional fields are not in required (OpenAI strict), and `default` is not allowed there.
    assert ("ship", "SL019") in rules
    assert any(f.rule == "SL020" and f.path.endswith("/default") for f in found)
    # additionalProperties: false on the root: required by OpenAI, unknown to Gemini's legacy schema.
    assert any(f.rule == "SL020" and f.path == "/inputSchema/additionalProperties" for f in found)


def test_official_sdk_shapes(sdk_tools: list[dict[str, Any]]) -> None:
    ship_schema = next(t for t in sdk_tools if t["name"] == "ship")["inputSchema"]
    assert ship_schema["properties"]["address"] == {"$ref": "#/$defs/Address"}
    found = lint_tools(sdk_tools)
    by_tool = _by_tool(found)
    assert ("SL009", "warning") in by_tool["ship"]  # Cursor is reported failing on #/$defs/Address
    ship_refs = [f for f in found if f.tool == "ship" and f.rule == "SL009"]
    assert [f.clients for f in ship_refs] == [("cursor",)]
    # Pydantic titles are not descriptions.
    assert ("SL013", "info") in by_tool["ship"]


def test_fix_inlines_the_sdks_defs_but_not_a_recursive_model(sdk_tools: list[dict[str, Any]]) -> None:
    fixed, left = fix_tools(sdk_tools, profiles=ALL_PROFILES)
    ship_fixed = next(t for t in fixed if t["name"] == "ship")["inputSchema"]
    assert "$defs" not in ship_fixed
    assert ship_fixed["properties"]["address"]["properties"]["city"]["description"] == "City name"
    assert not any(f.rule == "SL009" and f.tool == "ship" for f in left)
    assert any(f.rule == "SL009" and f.tool == "walk_tree" for f in left)
