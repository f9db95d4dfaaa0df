"""Peer: one echo tool on FastMCP (its defaults)."""

import sys

from fastmcp import FastMCP

mcp = FastMCP("fastmcp-echo")


@mcp.tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        mcp.run(show_banner=False)
    else:
        mcp.run(
            transport="http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            show_banner=False,
            json_response=sys.argv[3] == "json",
            log_level="WARNING",
        )
