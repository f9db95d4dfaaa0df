"""A stdio server whose tool prints to stdout (stray output) and moves large strings both ways, and
which reports the switch interval it is served with."""

import sys

from mcpkit import Server, tool


@tool
def blob(text: str, size: int) -> str:
    """Return `size` characters after the length of `text` (printing to stdout on the way)."""
    print("stray output that must not reach the wire")
    return f"{len(text)}:" + "y" * size


@tool
def switch_interval() -> str:
    """The interpreter's switch interval while serving."""
    return repr(sys.getswitchinterval())


server = Server("stdio-echo", version="1.0.0", tools=[blob, switch_interval])

if __name__ == "__main__":
    server.run_stdio()
