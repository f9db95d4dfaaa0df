"""SL017: type arrays and OpenAPI `nullable` where a target rejects them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node


@register
class TypeArrayNullable(Rule):
    """## What it does
    Flags `type` given as an array (`["string", "null"]`) for the targets that reject it, and the
    OpenAPI keyword `nullable`, which JSON Schema does not have.

    ## Why is this bad?
    Gemini's legacy schema has a single `type` ("Proto field is not repeating"); Cursor's validator has
    failed calls with "must be of type null,string, got string" on type arrays. `nullable: true`
    means nothing to a JSON Schema validator: `null` is still rejected, so clients and the model are
    told two different things, and OpenAI strict mode does not accept it.

    ## Example
    ```json
    {"type": "object", "properties": {"note": {"type": ["string", "null"]},
     "tag": {"type": "string", "nullable": true}}}
    ```

    Use instead (leave optional arguments out of `required`):
    ```json
    {"type": "object", "properties": {"note": {"type": "string"}, "tag": {"type": "string"}}}
    ```

    ## References
    - cursor/cursor#3778: "must be of type null,string, got string".
      https://github.com/cursor/cursor/issues/3778
    - n8n#15553, zed#44875 (reported): Gemini "Proto field is not repeating".
    - Gemini Schema: `type` is one value, `nullable` separate.
      https://ai.google.dev/api/caching#Schema
    """

    code = "SL017"
    name = "type-array-nullable"
    summary = "type arrays and OpenAPI `nullable` where a target rejects them"
    severity: ClassVar[Mapping[str, Severity]] = {
        "cursor": "error",
        "gemini": "error",
        "spec": "warning",
        "openai-strict": "warning",
    }
    keywords = frozenset({"nullable"})
    triggers: ClassVar[Mapping[str, frozenset[str | type]]] = {"type": frozenset[str | type]((list,))}

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        value = node.schema.get("type")
        is_input = node.root == "inputSchema"
        if isinstance(value, list) and is_input:
            levels = {"gemini": "error"}
            if len(value) > 1:
                levels["cursor"] = "error"
            out += self.report(
                tool,
                node.pointer + "/type",
                f"type array {json.dumps(value)}: Gemini takes one type and Cursor mis-validates unions",
                levels,
            )
        if "nullable" in node.schema:
            levels = {"spec": "warning"} | ({"openai-strict": "warning"} if is_input else {})
            out += self.report(
                tool,
                node.pointer + "/nullable",
                "`nullable` is OpenAPI, not JSON Schema: validators ignore it and still reject null",
                levels,
            )
        return out
