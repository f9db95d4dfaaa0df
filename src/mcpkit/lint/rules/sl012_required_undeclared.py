"""SL012: `required` names a property that `properties` does not declare, at any depth."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node

_BRANCHES = ("allOf", "anyOf", "oneOf")
#: A subschema reached through these may list `required` for properties declared by its parent.
_CONDITIONAL = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"}
)


def _declared(schema: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    props = schema.get("properties")
    if isinstance(props, dict):
        names.update(props)
    for keyword in _BRANCHES:
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, dict) and isinstance(branch.get("properties"), dict):
                    names.update(branch["properties"])
    return names


def _pattern_match(schema: dict[str, Any], name: str) -> bool:
    patterns = schema.get("patternProperties")
    if not isinstance(patterns, dict):
        return False
    for pattern in patterns:
        try:
            if re.search(pattern, name):
                return True
        except re.error:
            continue
    return False


@register
class RequiredUndeclared(Rule):
    """## What it does
    Flags names in `required` that the same object's `properties` (or its `allOf`/`anyOf`/`oneOf`
    branches, or a matching `patternProperties`) do not declare, at any depth. A subschema inside a
    composition that only lists `required` (the "at least one of" idiom) is left alone.

    ## Why is this bad?
    The model is told an argument is required but not what it is. OpenAI strict mode rejects the
    schema ("Extra required key … supplied"), and Gemini answers 400 "property is not defined". With
    `additionalProperties: false` the object can never be valid at all.

    ## Example
    ```json
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q", "limit"]}
    ```

    Use instead:
    ```json
    {"type": "object", "required": ["q", "limit"],
     "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}}
    ```

    ## References
    - camel-ai#2629 (reported): OpenAI strict "Extra required key … supplied".
    - iBUHub/AIStudioToAPI#154: Gemini "parameters.required[0]: property is not defined".
      https://github.com/iBUHub/AIStudioToAPI/issues/154
    """

    code = "SL012"
    name = "required-undeclared"
    summary = "`required` names a property that `properties` does not declare, at any depth"
    severity: ClassVar[Mapping[str, Severity]] = {
        "openai-strict": "error",
        "gemini": "error",
        "claude-code": "warning",
        "claude-api": "warning",
        "cursor": "warning",
        "vscode": "warning",
        "windsurf": "warning",
        "spec": "warning",
    }
    keywords = frozenset({"required"})

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        schema = node.schema
        required = schema.get("required")
        if not isinstance(required, list) or not required:
            return out
        if "properties" not in schema and node.via in _CONDITIONAL:
            return out
        declared = _declared(schema)
        missing = [
            n for n in required if isinstance(n, str) and n not in declared and not _pattern_match(schema, n)
        ]
        if not missing:
            return out
        closed = schema.get("additionalProperties") is False
        tail = "; with additionalProperties false no value is valid" if closed else ""
        levels = (
            None
            if node.root == "inputSchema"
            else dict.fromkeys(("claude-code", "cursor", "vscode", "windsurf", "spec"), "warning")
        )
        out += self.report(
            tool,
            node.pointer + "/required",
            f"required names {', '.join(repr(m) for m in missing)} that properties does not declare{tail}",
            levels,
        )
        return out
