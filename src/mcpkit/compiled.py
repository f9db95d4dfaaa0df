"""A tool compiled once, when its server is built: its schemas and its `tools/list` wire form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcpkit.definition import Tool
from mcpkit.errors import DefinitionError
from mcpkit.schema import CompiledSchema, compile_model

__all__ = ["CompiledTool", "compile_tool", "compile_tools"]


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A tool with its compiled schemas and its wire form."""

    tool: Tool
    wire: types.Tool
    recursive_defs: tuple[str, ...]
    allowed_secrets: frozenset[str]

    @property
    def listed(self) -> dict[str, Any]:
        """The tool as `tools/list` lists it, in wire JSON."""
        return self.wire.model_dump(mode="json", by_alias=True, exclude_none=True)


def compile_tool(t: Tool, *, server_secrets: frozenset[str]) -> CompiledTool:
    """`t` with its input and output schemas compiled (a `DefinitionError` if they do not)."""
    inp = compile_model(t.input, mode="validation", what=f"tool {t.name!r} input", strict=t.strict)
    if t.input_schema is not None:
        if t.input_schema.get("type") != "object":
            raise DefinitionError(f'tool {t.name!r}: input_schema needs "type": "object" at the root')
        inp = CompiledSchema(dict(t.input_schema))
    out = compile_model(t.output, mode="serialization", what=f"tool {t.name!r} output") if t.output else None
    wire = types.Tool(
        name=t.name,
        title=t.title,
        description=t.description,
        input_schema=inp.schema,
        output_schema=out.schema if out else None,
        annotations=t.listed_annotations(),
    )
    recursive = inp.recursive + (out.recursive if out else ())
    return CompiledTool(t, wire, recursive, server_secrets | frozenset(t.secrets))


def compile_tools(
    name: str, tools: Sequence[Tool], *, server_secrets: frozenset[str]
) -> dict[str, CompiledTool]:
    """The tools of server `name`, compiled; refuses none, a non-`Tool`, and names that collide
    (case-insensitively: clients fold case)."""
    if isinstance(tools, Tool) or not tools:
        raise DefinitionError(
            f"server {name!r} has no tools: pass tools=[...] (a list of mcpkit.Tool, or @tool functions)"
        )
    compiled: dict[str, CompiledTool] = {}
    seen: dict[str, str] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise DefinitionError(f"tools must be mcpkit.Tool instances, got {type(t).__name__}")
        folded = t.name.casefold()
        if folded in seen:
            other = seen[folded]
            why = (
                "twice" if other == t.name else f"as {other!r} and {t.name!r} (names differing only in case)"
            )
            raise DefinitionError(f"server {name!r}: tool name defined {why}; tool names must be unique")
        seen[folded] = t.name
        compiled[t.name] = compile_tool(t, server_secrets=server_secrets)
    return compiled
