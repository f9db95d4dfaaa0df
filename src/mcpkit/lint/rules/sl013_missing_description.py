"""SL013: a tool without a description (parameters without descriptions: info)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import escape

_ALL = ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "openai-strict", "gemini", "spec")


@register
class MissingDescription(Rule):
    """## What it does
    Flags a tool with no (or a blank) `description`, and, as info, top-level parameters without one.

    ## Why is this bad?
    The description is all a model knows about when to call a tool; without it the model guesses
    from the name, and the official conformance suite's `tools-list` scenario fails a tool without
    one. A parameter without a description leaves the model to guess the format (`title`, which
    Pydantic fills from the field name, says nothing new).

    ## Example
    ```json
    {"name": "lookup", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}}
    ```

    Use instead:
    ```json
    {"name": "lookup", "description": "Fetch one order by id.",
     "inputSchema": {"type": "object",
                     "properties": {"id": {"type": "string", "description": "Order id, e.g. ORD-1234"}}}}
    ```

    ## References
    - modelcontextprotocol/conformance `tools.ts`: the `tools-list` scenario expects descriptions.
      https://github.com/modelcontextprotocol/conformance
    - MCP 2025-11-25, tools: `description` is the model's guide to a tool.
      https://modelcontextprotocol.io/specification/2025-11-25/server/tools
    """

    code = "SL013"
    name = "missing-description"
    summary = "tool without a description (parameters without descriptions: info)"
    severity: ClassVar[Mapping[str, Severity]] = dict.fromkeys(_ALL, "warning")

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        text = tool.raw.get("description")
        if not isinstance(text, str) or not text.strip():
            yield from self.report(tool, "/description", "the tool has no description")
        schema = tool.input_schema
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict):
            return
        info: dict[str, Severity] = dict.fromkeys(_ALL, "info")
        for name, sub in props.items():
            if not isinstance(sub, dict) or "$ref" in sub:
                continue
            text = sub.get("description")
            if not isinstance(text, str) or not text.strip():
                yield from self.report(
                    tool,
                    f"/inputSchema/properties/{escape(name)}",
                    f"parameter {name!r} has no description",
                    info,
                )
