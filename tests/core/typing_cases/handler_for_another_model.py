"""mypy must reject the two marked lines and accept the rest (tests/core/test_typing.py runs it)."""

from pydantic import BaseModel

from mcpkit import Context, Server, Tool, ToolError, tool


class OrderIn(BaseModel):
    order_id: str


class RefundIn(BaseModel):
    amount: int


class Order(BaseModel):
    id: str


async def lookup(args: OrderIn, ctx: Context) -> Order:
    return Order(id=args.order_id)


async def refund(args: RefundIn, ctx: Context) -> str:
    return str(args.amount)


class NotFound(ToolError):
    code = "NOT_FOUND"
    expose_data = True


good = Tool(name="lookup", description="Look up.", input=OrderIn, output=Order, handler=lookup)
wrong = Tool(name="lookup", description="Look up.", input=OrderIn, handler=refund)  # expect-error


@tool
def add(a: int, b: int = 2) -> int:
    """Add."""
    return a + b


total: int = add(1, 2)
bad_call: str = add(1, 2)  # expect-error
server = Server("typed", tools=[good, add])


async def fetch(ctx: Context) -> str:
    order = await ctx.fetch_json("https://api.example.com/o/1", schema=Order)
    return order.id
