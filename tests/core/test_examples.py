"""The ported examples (seeds 000 and 003, FastMCP's tools docs) through the official SDK client."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from mcpkit.testing import MockEgress, connect
from tests.helpers import dump, text_of

pytestmark = pytest.mark.anyio


def code(result: Any) -> str | None:
    return (result.meta or {}).get("mcpkit/error", {}).get("code")


async def test_fastmcp_tools_docs_port() -> None:
    from examples.fastmcp_tools import server

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with connect(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        added = await client.call_tool("add", {"a": 2, "b": 3})
        lax = await client.call_tool("add", {"a": "2", "b": 3})
        found = await client.call_tool(
            "search_products", {"query": "shoe", "category": "shoes", "max_results": 1}
        )
        too_many = await client.call_tool("search_products", {"query": "shoe", "max_results": 500})
        bad_url = await client.call_tool("resize_image", {"url": "http://x"})
        zero = await client.call_tool("divide", {"a": 1, "b": 0})
        user = await client.call_tool("get_user", {"user_id": 7})
        items = await client.call_tool(
            "process_items", {"items": ["a", "b", "c"]}, progress_callback=on_progress
        )
    assert text_of(added) == "5" and code(lax) == "INVALID_PARAMS"
    assert found.structured_content == {"results": ["trail shoe"]}
    assert code(too_many) == code(bad_url) == "INVALID_PARAMS"
    assert text_of(zero) == "TOOL_ERROR: Division by zero is not allowed; pass a non-zero b."
    assert user.structured_content == {"id": 7, "name": "user 7", "active": True}
    assert listed["get_user"].output_schema is not None
    ann = listed["delete_file"].annotations
    assert ann is not None and ann.destructive_hint is True and ann.read_only_hint is False
    assert listed["search_products"].input_schema["properties"]["category"] == {
        "enum": ["shoes", "clothing"],
        "type": "string",
    }
    assert text_of(items) == "processed 3 items" and progress == [1, 2, 3]


async def test_seed_000_oracle_tools_port() -> None:
    from examples import oracle_tools
    from examples.oracle_tools import server

    async with connect(server) as client:
        asked = await client.call_tool("oracle_ask", {"question": "why", "files": ["src/*.py"]})
        empty = await client.call_tool("oracle_ask", {"question": ""})
        first = await client.call_tool("oracle_skills", {})
        again = await client.call_tool("oracle_skills", {})
        unknown = await client.call_tool("oracle_skill_get", {"skill": "cooking"})
        before = await client.call_tool("oracle_memory_get", {"key": "deploy"})
        updated = await client.call_tool("oracle_memory_update", {"key": "deploy", "text": "Canary first."})
        after = await client.call_tool("oracle_memory_get", {"key": "deploy"})
        found = await client.call_tool("find_tools", {"query": "skills"})
        limited = [await client.call_tool("oracle_ask", {"question": f"q{i}"}) for i in range(10)]
    assert asked.structured_content == {"output": "[default] why", "files_included": 1}
    assert code(empty) == "INVALID_PARAMS"
    assert first.structured_content == again.structured_content == {"skills": ["coding", "security"]}
    assert (again.meta or {})["mcpkit/cached"] is True and oracle_tools.LOADS["skills"] == 1
    assert code(unknown) == "INVALID_SKILL" and "Run oracle_skills" in text_of(unknown)
    assert (unknown.meta or {})["mcpkit/error"]["data"] == {"available": ["coding", "security"]}
    assert text_of(before).startswith("Deploys") and text_of(after) == "Canary first."
    assert "1 cached skill lists dropped" in text_of(updated)
    assert (found.structured_content or {})["tools"][0]["name"] == "oracle_skills"
    assert [code(r) for r in limited].count("RATE_LIMITED") == 1  # 10/min: the 11th ask is refused


def order_api(request: httpx2.Request) -> httpx2.Response:
    if request.url.host == "auth.acme.com":
        return httpx2.Response(200, json={"access_token": "at-0123456789", "expires_in": 600})
    assert request.headers["authorization"] == "Bearer at-0123456789"
    order_id = request.url.path.rsplit("/", 1)[-1]
    if order_id == "ORD-404":
        return httpx2.Response(404, json={"error": "not found"})
    return httpx2.Response(200, json={"id": order_id, "status": "shipped", "items": [{"sku": "A1"}]})


async def test_seed_003_lookup_order_port() -> None:
    from examples.orders import build

    secrets = {"ORDERS_CLIENT_ID": "client-1", "ORDERS_CLIENT_SECRET": "client-secret-1"}
    routes = {"orders.acme.internal": order_api, "auth.acme.com": order_api}
    resolve = {"orders.acme.internal": "10.1.2.3"}
    async with connect(build(secrets), egress=MockEgress(routes, resolve=resolve)) as client:
        refused = await client.call_tool("lookup_order", {"order_id": "ORD-10423"})
    assert code(refused) == "REFUSED" and "10.1.2.3" not in dump(refused)
    server = build({**secrets, "MCPKIT_ORDERS_NETWORK": "10.1.0.0/16"})
    async with connect(server, egress=MockEgress(routes, resolve=resolve)) as client:
        ok = await client.call_tool("lookup_order", {"order_id": "ORD-10423"})
        missing = await client.call_tool("lookup_order", {"order_id": "ORD-404"})
        items = await client.call_tool("order_items", {"order_id": "ORD-7"})
        missing_items = await client.call_tool("order_items", {"order_id": "ORD-404"})
        bad = await client.call_tool("lookup_order", {"order_id": "../admin"})
    assert text_of(ok) == "Order ORD-10423: shipped"
    assert ok.structured_content == {"id": "ORD-10423", "status": "shipped", "items": [{"sku": "A1"}]}
    assert text_of(missing) == "TOOL_ERROR: Order ORD-404 not found."
    assert items.structured_content == {"order": "ORD-7", "items": [{"sku": "A1"}]}
    assert code(missing_items) == "TOOL_ERROR" and code(bad) == "INVALID_PARAMS"
