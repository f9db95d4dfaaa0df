"""SL004: an array schema without `items`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._types import declared_types
from mcpkit.lint._walk import Node


@register
class ArrayWithoutItems(Rule):
    """## What it does
    Flags a subschema whose `type` is (or includes) `"array"` but that has no `items`.

    ## Why is this bad?
    VS Code refuses the tool with "tool parameters array type must have items"; OpenAI-compatible
    endpoints and Gemini reject function parameters with an item-less array. The model also has no
    idea what to put in the array.

    ## Example
    ```json
    {"type": "object", "properties": {"tags": {"type": "array"}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    ```

    ## Fix
    `--fix` adds `"items": {}`, which accepts exactly what the missing keyword accepted.

    ## References
    - microsoft/vscode#246119, #284536, vscode#257537: "tool parameters array type must have items".
      https://github.com/microsoft/vscode/issues/246119
      https://github.com/microsoft/vscode/issues/284536
    - bnb-chain#68, ruflo#1296 (reported): OpenAI-compatible endpoints and opencode reject it.
    """

    code = "SL004"
    name = "array-without-items"
    summary = "array without `items`"
    severity: ClassVar[Mapping[str, Severity]] = {
        "vscode": "error",
        "openai-strict": "error",
        "gemini": "error",
    }
    fixable = True
    triggers: ClassVar[Mapping[str, frozenset[str | type]]] = {"type": frozenset[str | type](("array", list))}

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        if node.root != "inputSchema":
            return out
        types = declared_types(node.schema)
        if types and "array" in types and "items" not in node.schema:
            out += self.report(tool, node.pointer, "array without `items`; say what the elements are")
        return out
