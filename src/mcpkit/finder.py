"""The built-in `find_tools` tool: clients that cap the tool count can still reach every tool."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from mcpkit.definition import Tool

if TYPE_CHECKING:
    from mcpkit.context import Context
    from mcpkit.server import Server

__all__ = ["FindToolsIn", "FoundTools", "find_tools_tool", "score"]

_WORD = re.compile(r"[a-z0-9]+")


class FindToolsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(
        description="Words describing the task, e.g. 'refund an invoice'", min_length=1, max_length=200
    )
    limit: int = Field(5, ge=1, le=20, description="How many tools to return at most")


class FoundTool(BaseModel):
    """One match, shaped as `tools/list` lists a tool (`inputSchema`, `outputSchema`, `annotations`)."""

    model_config = ConfigDict(populate_by_name=True)
    name: str = Field(description="The tool's name, to call it with")
    title: str | None = Field(None, description="A human-readable name")
    description: str = Field(description="What the tool does")
    input_schema: dict[str, object] = Field(
        alias="inputSchema", description="The JSON Schema of its arguments"
    )
    output_schema: dict[str, object] | None = Field(
        None, alias="outputSchema", description="The JSON Schema of its structured result, if any"
    )
    annotations: dict[str, object] | None = Field(None, description="Its behaviour hints")


class FoundTools(BaseModel):
    tools: list[FoundTool] = Field(description="Best matches first")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("_", " ")))


def score(query: str, tool: Tool) -> int:
    """How well `tool` matches `query`: name and keyword hits weigh most, then title, then description.

    >>> t = Tool(name="refund_invoice", description="Refund an invoice.", input=FindToolsIn, handler=print)
    >>> score("refund invoice", t) > score("weather", t)
    True
    """
    wanted = _words(query)
    if not wanted:
        return 0
    name, keywords = _words(tool.name), {w for k in tool.keywords for w in _words(k)}
    title, text = _words(tool.title or ""), _words(tool.description)
    prefix = sum(1 for w in wanted for n in name | keywords if len(w) > 2 and n.startswith(w) and n != w)
    return (
        4 * len(wanted & name)
        + 3 * len(wanted & keywords)
        + 2 * len(wanted & title)
        + len(wanted & text)
        + prefix
    )


def find_tools_tool(server: Server) -> Tool:
    """A `find_tools` tool that searches every tool `server` serves, listed or not."""

    def find(args: FindToolsIn, ctx: Context) -> FoundTools:
        ranked = sorted(
            (
                (score(args.query, t), i, t)
                for i, t in enumerate(server.available_tools())
                if t.name != "find_tools"
            ),
            key=lambda item: (-item[0], item[1]),
        )
        hits = [t for s, _, t in ranked if s > 0][: args.limit]
        return FoundTools(tools=[FoundTool.model_validate(server.compiled[t.name].listed) for t in hits])

    return Tool(
        name="find_tools",
        title="Find tools",
        description=(
            "Search this server's tools by what you want to do. Returns the best matches with their argument "
            "schemas; call a returned tool by its name even if it is not in your tool list."
        ),
        input=FindToolsIn,
        output=FoundTools,
        handler=find,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        category="mcpkit",
        keywords=("search", "discover", "tools"),
    )
