"""`make demo`: start an example server as a real stdio subprocess and drive it with the official client."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent


async def main() -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(HERE / "weather.py")])
    async with Client(params, mode="legacy") as client:
        info = client.server_info
        print(f"connected to {info.name if info else '?'} over stdio, protocol {client.protocol_version}")
        for t in (await client.list_tools()).tools:
            print(f"  tool {t.name}: {t.description}")
        result = await client.call_tool("forecast", {"city": "Oslo", "days": 3})
        print("forecast(Oslo, 3) ->", result.content[0].text)  # type: ignore[union-attr]
        refused = await client.call_tool("forecast", {"city": "Oslo", "days": "3"})
        print("forecast(days='3') ->", refused.content[0].text)  # type: ignore[union-attr]


if __name__ == "__main__":
    anyio.run(main)
