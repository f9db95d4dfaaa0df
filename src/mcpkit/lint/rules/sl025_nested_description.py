"""SL025: nested parameters (inside objects and arrays) without a description (info)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node

_ALL = ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "openai-strict", "gemini", "spec")
_SELF_EXPLAINING = frozenset({"const", "enum", "$ref"})


def _described(schema: dict[str, Any]) -> bool:
    text = schema.get("description")
    return (isinstance(text, str) and bool(text.strip())) or not _SELF_EXPLAINING.isdisjoint(schema)


@register
class NestedDescription(Rule):
    """## What it does
    Counts the parameters below the top level of `inputSchema` (properties of nested objects, of
    array items, of `$defs` entries) that have no `description`, and reports them once per tool with
    the first few paths. Top-level parameters are SL013's. A property with `const`, `enum` or `$ref`
    is taken as self-explaining.

    ## Why is this bad?
    Nothing breaks: this is a note. But the model sees only names and types for these fields, and
    nested fields (a filter's operator, an item's unit) are where it guesses wrong most; a short
    description with the format and an example is the cheapest fix for bad calls.

    ## Example
    ```json
    {"type": "object", "properties": {"filter": {"type": "object", "description": "Which rows",
     "properties": {"op": {"type": "string"}, "value": {"type": "string"}}}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"filter": {"type": "object", "description": "Which rows",
     "properties": {"op": {"type": "string", "description": "eq, lt or gt"},
                    "value": {"type": "string", "description": "compared as text"}}}}}
    ```

    ## References
    - MCP 2025-11-25, tools: the input schema's descriptions are what the model has to go on.
      https://modelcontextprotocol.io/specification/2025-11-25/server/tools
    - Anthropic, tool use best practices: describe every parameter, what it means and its format.
      https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
    """

    code = "SL025"
    name = "nested-parameter-undescribed"
    summary = "parameters below the top level without a description (one info finding per tool)"
    severity: ClassVar[Mapping[str, Severity]] = dict.fromkeys(_ALL, "info")
    keywords = frozenset({"properties"})

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._missing: dict[int, list[str]] = {}

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        props = node.schema["properties"]
        if node.root != "inputSchema" or node.parent is None or not isinstance(props, dict):
            return []
        missing = [
            f"{node.pointer}/properties/{name}"
            for name, sub in props.items()
            if isinstance(sub, dict) and not _described(sub)
        ]
        if missing:
            self._missing.setdefault(tool.index, []).extend(missing)
        return []

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        missing = self._missing.pop(tool.index, None)
        if not missing:
            return
        shown = ", ".join(p.removeprefix("/inputSchema") for p in missing[:3])
        more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
        yield from self.report(
            tool,
            missing[0],
            f"{len(missing)} nested parameter(s) without a description: {shown}{more}",
        )
