"""FastMCP's tools documentation (gofastmcp.com, servers/tools), ported to mcpkit.

The same kinds of tool the FastMCP pages walk through: a plain function, optional parameters,
constrained and described parameters (`Annotated`, `Field`), an intentional error, a structured
return, behaviour annotations, and a tool that reports progress through its context. What changes in
mcpkit: `@tool` builds a `Tool` that a `Server` receives as a list, arguments are strict (`"10"` is
not an integer), and an unexpected exception reaches the model as one safe sentence.

    python examples/fastmcp_tools.py      # serves over stdio
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mcpkit import Context, Server, ToolAnnotations, ToolError, tool

PRODUCTS = [
    {"name": "trail shoe", "category": "shoes", "price": 120.0},
    {"name": "road shoe", "category": "shoes", "price": 95.0},
    {"name": "rain jacket", "category": "clothing", "price": 180.0},
]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def search_products(
    query: Annotated[str, "Words to look for in product names"],
    category: Literal["shoes", "clothing"] | None = None,
    max_results: Annotated[int, Field(ge=1, le=50, description="At most this many results")] = 10,
) -> dict[str, list[str]]:
    """Search the product catalogue, optionally within one category."""
    hits = [
        p["name"]
        for p in PRODUCTS
        if str(query).lower() in str(p["name"]) and category in (None, p["category"])
    ]
    return {"results": [str(h) for h in hits[:max_results]]}


@tool
def resize_image(
    url: Annotated[str, Field(pattern=r"^https://", description="The image's https URL")],
    width: Annotated[int, Field(ge=1, le=4096)] = 800,
    fmt: Literal["png", "jpeg", "webp"] = "png",
) -> str:
    """Describe how an image would be resized (constraints are validated before this runs)."""
    return f"{url} -> {width}px {fmt}"


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("Division by zero is not allowed; pass a non-zero b.")
    return a / b


class User(BaseModel):
    id: int = Field(description="The user's id")
    name: str = Field(description="Display name")
    active: bool


@tool
def get_user(user_id: Annotated[int, Field(ge=1)]) -> User:
    """Get a user's profile (a structured result with an output schema)."""
    return User(id=user_id, name=f"user {user_id}", active=user_id % 2 == 1)


@tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=True), mutating=True)
def delete_file(path: Annotated[str, Field(max_length=256)]) -> str:
    """Delete a file from the scratch area (pretend: nothing is touched)."""
    return f"deleted {path}"


@tool
async def process_items(items: Annotated[list[str], Field(max_length=100)], ctx: Context) -> str:
    """Process items one by one, reporting progress."""
    for done, _item in enumerate(items, 1):
        await ctx.report_progress(done, len(items), f"processed {done}")
    return f"processed {len(items)} items"


server = Server(
    "fastmcp-docs-port",
    tools=[add, search_products, resize_image, divide, get_user, delete_file, process_items],
)

if __name__ == "__main__":
    server.run_stdio()
