"""ctx.fetch through a real server: the guard is the only way out, and its refusals are model-safe."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from mcpkit import Context, Server, Tool
from mcpkit.egress import GuardedClient, StaticResolver
from mcpkit.testing import connect
from tests.egress.egress_support import Reply, TestServer, client_for
from tests.helpers import dump, text_of

pytestmark = pytest.mark.anyio


class UrlIn(BaseModel):
    url: str


class Weather(BaseModel):
    city: str
    celsius: float


async def fetch_weather(args: UrlIn, ctx: Context) -> str:
    data = await ctx.fetch_json(args.url, schema=Weather)
    return f"{data.city}: {data.celsius} C"


def tools() -> list[Tool]:
    return [Tool(name="weather", description="Fetch the weather.", input=UrlIn, handler=fetch_weather)]


async def test_fetch_json_reaches_an_allowed_api_and_validates_it() -> None:
    body = b'{"city": "Oslo", "celsius": 3.5}'
    async with TestServer(lambda seen: Reply(200, [("Content-Type", "application/json")], body)) as upstream:
        server = Server("egress", tools=tools(), egress=client_for(upstream))
        async with connect(server) as client:
            result = await client.call_tool("weather", {"url": f"http://api.test:{upstream.port}/now"})
        await server.aclose()
    assert text_of(result) == "Oslo: 3.5 C"
    assert upstream.seen[0].headers["host"] == f"api.test:{upstream.port}"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "file:///etc/passwd",
        "http://2130706433/",
        "http://user:pw@example.com/",
    ],
)
async def test_default_guard_refuses_internal_targets_without_echoing_them(url: str) -> None:
    server = Server("egress", tools=tools())
    async with connect(server) as client:
        result = await client.call_tool("weather", {"url": url})
    await server.aclose()
    assert result.is_error
    assert result.meta["mcpkit/error"]["code"] == "REFUSED"  # type: ignore[index]
    assert "pw" not in dump(result)
    assert "Traceback" not in dump(result)


async def test_a_name_resolving_inside_is_refused_without_revealing_the_address() -> None:
    guard = GuardedClient(resolver=StaticResolver({"intranet.example.com": ["10.20.30.40"]}))
    server = Server("egress", tools=tools(), egress=guard)
    async with connect(server) as client:
        result = await client.call_tool("weather", {"url": "https://intranet.example.com/"})
    await server.aclose()
    assert result.meta["mcpkit/error"]["code"] == "REFUSED"  # type: ignore[index]
    assert "10.20.30.40" not in dump(result)


async def test_allowlist_denies_everything_else() -> None:
    server = Server("egress", tools=tools(), egress=["api.example.com"])
    async with connect(server) as client:
        result = await client.call_tool("weather", {"url": "https://evil.example.net/"})
    await server.aclose()
    assert result.meta["mcpkit/error"]["code"] == "REFUSED"  # type: ignore[index]
