"""SL011: a tuple written as an `items` array under 2020-12, or `prefixItems` a draft-07 validator ignores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node


@register
class TupleItems(Rule):
    """## What it does
    Flags `items` given as an array (the draft-07 tuple form) in a 2020-12 schema, and `prefixItems`
    (the 2020-12 tuple form) where a draft-07 validator will read it.

    ## Why is this bad?
    In 2020-12 `items` must be a single schema; the array form is invalid, and the Claude API and xAI
    answer 400 for the whole request. The reverse also breaks: Cursor validates with a draft-07
    validator, which ignores `prefixItems`, so the tuple's element types are not enforced there, and
    in a schema that declares draft-07 `prefixItems` means nothing at all.

    ## Example
    ```json
    {"type": "object", "properties": {"point": {"type": "array",
     "items": [{"type": "number"}, {"type": "number"}]}}}
    ```

    Use instead (read alike by draft-07 and 2020-12 validators; say which element is which in the
    description, or use an object with named properties):
    ```json
    {"type": "object", "properties": {"point": {"type": "array", "description": "[x, y]",
     "items": {"type": "number"}, "minItems": 2, "maxItems": 2}}}
    ```

    ## Fix
    `--fix` renames an `items` array to `prefixItems` and a sibling `additionalItems` to `items`,
    which is what the array form means (Cursor's warning about `prefixItems` then remains).

    ## References
    - JSON Schema 2020-12 release notes: `items` array replaced by `prefixItems`.
      https://json-schema.org/draft/2020-12/release-notes
    - hyperdx#2925, hermes-agent#20976 (reported): Claude API and xAI 400 on `items` arrays.
    - agent-bundle#580 (reported): Cursor's draft-07 validator and `prefixItems`.
    """

    code = "SL011"
    name = "tuple-items"
    summary = (
        "tuple written as an `items` array under 2020-12 "
        "(and `prefixItems` where a draft-07 validator reads it)"
    )
    severity: ClassVar[Mapping[str, Severity]] = {
        "claude-code": "error",
        "claude-api": "error",
        "spec": "error",
        "cursor": "warning",
    }
    fixable = True
    keywords = frozenset({"prefixItems"})
    triggers: ClassVar[Mapping[str, frozenset[str | type]]] = {"items": frozenset[str | type]((list,))}

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        dialect = tool.dialect(node)
        is_input = node.root == "inputSchema"
        if isinstance(node.schema.get("items"), list) and not dialect.tuple_items:
            levels: dict[str, Severity] = {"claude-code": "error", "spec": "error"}
            if is_input:
                levels["claude-api"] = "error"
            out += self.report(
                tool,
                node.pointer + "/items",
                f"`items` is an array, which {dialect.name if dialect.known else '2020-12'} does not allow; "
                "use `prefixItems`",
                levels,
            )
        if "prefixItems" in node.schema:
            levels = {"cursor": "warning"}
            note = "Cursor's draft-07 validator ignores `prefixItems`"
            if dialect.legacy:
                levels["spec"] = "warning"
                note = f"`prefixItems` means nothing in {dialect.name}; " + note
            out += self.report(tool, node.pointer + "/prefixItems", note, levels)
        return out
