"""Reading a tool list from JSON: `{"tools": [...]}`, a bare list, or a JSON-RPC `tools/list` response."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class InputError(Exception):
    """The input is not a tool list (exit code 2 in the CLI)."""


@dataclass(slots=True)
class ToolList:
    """What `mcpkit lint` lints: the tools plus, where known, the server's instructions and name."""

    tools: list[dict[str, Any]]
    instructions: str | None = None
    server_name: str | None = None
    source: str = "-"
    #: The server's `serverInfo` from `initialize` (live servers only).
    server_info: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def parse_tool_list(text: str, source: str = "-") -> ToolList:
    """Parse a tool list from JSON text.

    Accepts `{"tools": [...]}` (optionally with `"instructions"`), a bare list of tools, a JSON-RPC
    response whose `result` holds `tools`, or a list of such responses (pages, concatenated).

    >>> parse_tool_list('{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}]}}').tools
    [{'name': 'a'}]

    Raises:
        InputError: not JSON, a JSON-RPC error, or no tool list in it.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if isinstance(data, list) and data and all(_is_rpc(item) for item in data):
        pages = [_from_object(item, source) for item in data]
        out = ToolList([t for page in pages for t in page.tools], source=source)
        out.instructions = next((p.instructions for p in pages if p.instructions), None)
        return out
    if isinstance(data, list):
        return ToolList(_checked(data, source), source=source)
    if isinstance(data, dict):
        return _from_object(data, source)
    raise InputError(f"{source}: expected an object or a list of tools, got {type(data).__name__}")


def _is_rpc(item: Any) -> bool:
    return isinstance(item, dict) and "jsonrpc" in item


def _from_object(data: dict[str, Any], source: str) -> ToolList:
    if "jsonrpc" in data:
        if "error" in data:
            raise InputError(f"{source}: a JSON-RPC error response: {json.dumps(data['error'])[:200]}")
        result = data.get("result")
        if not isinstance(result, dict):
            raise InputError(f"{source}: a JSON-RPC message without a result object")
        data = result
    if "tools" not in data:
        raise InputError(f'{source}: no "tools" key (expected {{"tools": [...]}})')
    out = ToolList(_checked(data["tools"], source), source=source)
    instructions = data.get("instructions")
    if isinstance(instructions, str):
        out.instructions = instructions
    if data.get("nextCursor"):
        out.notes.append("the response has a nextCursor: this is only one page of the list")
    return out


def _checked(tools: Any, source: str) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InputError(f'{source}: "tools" is {type(tools).__name__}, not a list')
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InputError(f"{source}: tools[{index}] is {type(tool).__name__}, not an object")
    return tools
