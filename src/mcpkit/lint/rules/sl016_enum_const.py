"""SL016: empty `enum`, enum values of the wrong type, `const` where a target does not know it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._types import declared_types, json_type_matches
from mcpkit.lint._walk import Node

_GENERAL: dict[str, Severity] = dict.fromkeys(
    ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "openai-strict", "spec"), "warning"
)


@register
class EnumConst(Rule):
    """## What it does
    Flags an empty `enum`, `enum` values that the same schema's `type` rejects, non-string enum
    values for Gemini, and `const` for Gemini.

    ## Why is this bad?
    An empty enum, or values of the wrong type, can never validate: the model cannot produce a valid
    call. Gemini's legacy `Schema.enum` is `string[]` and it does not know `const` at all
    ("Invalid JSON payload received. Unknown name \\"const\\""), which fails the whole request;
    Zod and Pydantic emit `const` for literals.

    ## Example
    ```json
    {"type": "object", "properties": {"mode": {"type": "string", "enum": [1, 2]}, "kind": {"const": "a"}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"mode": {"type": "string", "enum": ["1", "2"]},
     "kind": {"type": "string", "enum": ["a"]}}}
    ```

    ## References
    - Gemini Schema: `enum` is a list of strings; no `const`.
      https://ai.google.dev/api/caching#Schema
    - zed-extensions/mcp-server-brave-search#12: Gemini 400 `Unknown name "const"`; goai#108 (reported).
      https://github.com/zed-extensions/mcp-server-brave-search/issues/12
    """

    code = "SL016"
    name = "enum-const"
    summary = "empty `enum`, enum values of the wrong type, `const` where a target does not know it"
    severity: ClassVar[Mapping[str, Severity]] = {**_GENERAL, "gemini": "error"}
    keywords = frozenset({"enum", "const"})

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        schema = node.schema
        gemini = node.root == "inputSchema"
        general = (
            _GENERAL
            if gemini
            else dict.fromkeys(("claude-code", "cursor", "vscode", "windsurf", "spec"), "warning")
        )
        values = schema.get("enum")
        if isinstance(values, list):
            path = node.pointer + "/enum"
            if not values:
                levels = general | ({"gemini": "error"} if gemini else {})
                out += self.report(tool, path, "empty enum: no value is valid", levels)
            else:
                types = declared_types(schema)
                wrong = [v for v in values if types and not any(json_type_matches(v, t) for t in types)]
                if wrong:
                    out += self.report(
                        tool,
                        path,
                        f"enum values {', '.join(json.dumps(v) for v in wrong[:5])} are not of type "
                        f"{'/'.join(sorted(types or ()))}: they can never validate",
                        general,
                    )
                if gemini and any(not isinstance(v, str) for v in values):
                    out += self.report(
                        tool, path, "Gemini accepts only string enum values", {"gemini": "error"}
                    )
        if "const" in schema and gemini:
            out += self.report(
                tool,
                node.pointer + "/const",
                "Gemini does not know `const`; use a one-value `enum`",
                {"gemini": "error"},
            )
        return out
