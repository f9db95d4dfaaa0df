"""The demo story: `mcpkit sql serve --demo` as a real stdio subprocess, driven by the official client.

Run `python -m mcpkit.sql.walkthrough`: it lists the tools, answers a query, refuses a write,
caps a long result with "more rows exist", runs one of the demo's report tools, draws a chart (the
PNG is written to a temporary file) and profiles the demo table.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client

__all__ = ["main", "walkthrough"]


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def walkthrough(echo: Any = print, errlog: TextIO | None = None) -> list[Any]:
    """Drive the demo server through the official SDK client; return the call results in order.

    Args:
        echo: Prints one step of the story.
        errlog: Where the server's stderr (its operator log) goes; default this process's stderr.
    """
    server = ["-m", "mcpkit", "sql", "serve", "--demo"]
    params = StdioServerParameters(command=sys.executable, args=server, env=dict(os.environ))  # ours: all env
    results: list[Any] = []
    async with Client(stdio_client(params, errlog=errlog or sys.stderr), mode="legacy") as client:
        info = client.server_info
        echo(f"connected to {info.name if info else '?'} over stdio, protocol {client.protocol_version}")
        for tool in (await client.list_tools()).tools:
            echo(f"  tool {tool.name}: {tool.description}")
        by_region = "SELECT region, SUM(units) AS units FROM sales_demo GROUP BY region ORDER BY units DESC"
        steps: list[tuple[str, dict[str, Any]]] = [
            ("a query", {"query": by_region}),
            ("a write", {"query": "DELETE FROM sales_demo"}),
            ("a long result", {"query": "SELECT id, region, receipt FROM sales_demo", "max_rows": 5}),
        ]
        for label, arguments in steps:
            result = await client.call_tool("execute_query", arguments)
            results.append(result)
            echo(f"\n{label}: {arguments['query']}\n{_text(result)}")
        report = {"year": 2023, "region": "Europe"}
        result = await client.call_tool("quarterly_revenue_by_region", report)
        results.append(result)
        echo(f"\na report tool: quarterly_revenue_by_region({report})\n{_text(result)}")
        chart = {"query": by_region, "title": "Units by region"}
        result = await client.call_tool("create_chart", chart)
        results.append(result)
        echo(f"\na chart: create_chart({chart})\n{_text(result).splitlines()[0]}")
        for block in result.content:
            if isinstance(block, types.ImageContent):
                png = base64.b64decode(block.data)
                with tempfile.NamedTemporaryFile(prefix="mcpkit-chart-", suffix=".png", delete=False) as f:
                    f.write(png)
                echo(f"  the PNG image content ({len(png):,} bytes) is in {f.name}")
        result = await client.call_tool("profile_table", {"table": "sales_demo"})
        results.append(result)
        echo(f"\na profile: profile_table(sales_demo)\n{_text(result)}")
    return results


def main() -> None:
    """Run the walkthrough and print it."""
    anyio.run(walkthrough)


if __name__ == "__main__":
    main()
