"""SL019: the OpenAI strict-mode shape: `additionalProperties: false` and every property required."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._types import declared_types
from mcpkit.lint._walk import Node

#: Nesting the strict-mode docs allowed at first (5) and allow now (10).
_DEPTH_WARN, _DEPTH_MAX = 5, 10


@register
class OpenAIStrictShape(Rule):
    """## What it does
    For the `openai-strict` profile, checks every object in `inputSchema`: `additionalProperties`
    must be `false`, every property must be listed in `required`, and nesting must stay within the
    documented depth.

    ## Why is this bad?
    OpenAI rejects a strict function whose objects allow extra keys or leave properties optional
    ("Invalid schema for function …: In context=(), 'additionalProperties' is required to be supplied
    and to be false"); clients that turn on strict mode (and gateways that forward MCP tools to it)
    then fail the whole request. Optional arguments must be spelled as required-but-nullable.

    ## Example
    ```json
    {"type": "object", "required": ["q"],
     "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": ["integer", "null"]}},
     "required": ["q", "limit"], "additionalProperties": false}
    ```

    ## References
    - OpenAI structured outputs, supported schemas: `additionalProperties: false`, all fields required,
      nesting limits.
      https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
    - mcphub.nvim#124, karakeep#1831, ellmer#671 (reported): MCP tools failing under strict mode.
    """

    code = "SL019"
    name = "openai-strict-shape"
    summary = (
        "OpenAI strict-mode shape: `additionalProperties: false` and every property required on every object"
    )
    severity: ClassVar[Mapping[str, Severity]] = {"openai-strict": "error"}
    keywords = frozenset({"properties"})
    triggers: ClassVar[Mapping[str, frozenset[str | type]]] = {
        "type": frozenset[str | type](("object", list))
    }

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        schema = node.schema
        if node.root != "inputSchema":
            return out
        types = declared_types(schema)
        if not ((types and "object" in types) or "properties" in schema):
            return out
        problems: list[str] = []
        level: Severity = "error"
        if schema.get("additionalProperties") is not False:
            problems.append("needs `additionalProperties: false`")
        props = schema.get("properties")
        required = schema.get("required")
        if isinstance(props, dict):
            listed = set(required) if isinstance(required, list) else set()
            optional = [n for n in props if n not in listed]
            if optional:
                problems.append(
                    f"must list every property in required (missing {', '.join(map(repr, optional))})"
                )
        if node.depth > _DEPTH_MAX:
            problems.append(f"is nested {node.depth} deep, over {_DEPTH_MAX}")
        elif node.depth > _DEPTH_WARN:
            if not problems:
                level = "warning"
            problems.append(f"is nested {node.depth} deep, over the {_DEPTH_WARN} older models accept")
        if problems:
            out += self.report(
                tool,
                node.pointer,
                "strict mode: this object " + "; ".join(problems),
                {"openai-strict": level},
            )
        return out
