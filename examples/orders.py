"""Seed 003 (`@ontrove/mcp`'s `lookup_order`), ported to mcpkit.

The seed's hosted-server SDK: a tool with a described input, a declared secret, `ctx.fetch` to an
internal API behind an egress allowlist, declarative OAuth2 client credentials attached only to the
API host, `fetchJson` with a schema, a `ToolError` for a missing order, and `{text, structured}`
results without an output schema. The internal API resolves to a private address, which mcpkit
refuses unless the operator names the network (`egress_private`).

Tested offline through `mcpkit.testing.MockEgress` (tests/core/test_examples.py).

    MCPKIT_ORDERS_NETWORK=10.1.0.0/16 ORDERS_CLIENT_ID=... ORDERS_CLIENT_SECRET=... python examples/orders.py
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from mcpkit import Context, Server, ToolError, ToolResult, tool
from mcpkit.egress import OAuth2ClientCredentials

API_HOST = "orders.acme.internal"


class UpstreamOrder(BaseModel):
    """The upstream's shape, parsed leniently (it is not this tool's output contract)."""

    id: str
    status: str = "unknown"
    items: list[dict[str, Any]] = []


@tool(keywords=("order", "status"), annotations=None)
async def lookup_order(
    order_id: str = Field(description="e.g. 'ORD-10423'.", pattern=r"^ORD-\d{1,12}$"), *, ctx: Context
) -> ToolResult:
    """Look up an internal order by ID."""
    response = await ctx.fetch(f"https://{API_HOST}/v1/{{order_id}}", path_params={"order_id": order_id})
    if response.status_code == 404:
        raise ToolError(f"Order {order_id} not found.")
    order = UpstreamOrder.model_validate(response.json())
    return ToolResult(text=f"Order {order_id}: {order.status}", structured=order)


@tool
async def order_items(order_id: str = Field(pattern=r"^ORD-\d{1,12}$"), *, ctx: Context) -> dict[str, Any]:
    """List the items of an order (fetch_json with a schema: a typed result, non-2xx mapped)."""
    order = await ctx.fetch_json(
        f"https://{API_HOST}/v1/{{order_id}}", path_params={"order_id": order_id}, schema=UpstreamOrder
    )
    return {"order": order.id, "items": order.items}


def build(environ: dict[str, str] | None = None) -> Server:
    """The server; `environ` supplies secrets and the private network in tests."""
    env = dict(os.environ if environ is None else environ)
    network = env.get("MCPKIT_ORDERS_NETWORK")
    return Server(
        "orders",
        tools=[lookup_order, order_items],
        egress=[API_HOST, "auth.acme.com"],
        egress_private=[network] if network else [],
        auth=OAuth2ClientCredentials(
            token_url="https://auth.acme.com/oauth/token",
            client_id_secret="ORDERS_CLIENT_ID",
            client_secret_secret="ORDERS_CLIENT_SECRET",
            api_host=API_HOST,
        ),
        environ=env,
    )


if __name__ == "__main__":
    build().run_stdio()
