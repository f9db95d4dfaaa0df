"""SL022: a property name the Claude API refuses (`^[a-zA-Z0-9_.-]{1,64}$`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node, escape

KEY = re.compile(r"[a-zA-Z0-9_.\-]{1,64}")
_TOP: dict[str, Severity] = {"claude-api": "error", "claude-code": "error"}
_NESTED: dict[str, Severity] = {"claude-api": "warning", "claude-code": "warning"}


@register
class PropertyKey(Rule):
    """## What it does
    Checks every property name in `inputSchema` (the keys of every `properties`) against
    the pattern the Claude API enforces, `^[a-zA-Z0-9_.-]{1,64}$`: no `$`, brackets, spaces, `/`, or
    more than 64 characters.

    ## Why is this bad?
    The Claude API answers 400 "tools.N.custom.input_schema.properties: Property keys should match
    pattern '^[a-zA-Z0-9_.-]{1,64}$'" and fails the whole request, so one such tool breaks every turn
    of a Claude Code session (Bedrock Converse enforces the same pattern). The check has been reported
    to cover the top-level properties only, so nested keys (MongoDB's `$vectorSearch`, `$meta`) are a
    warning: they pass today, and would break the day the check goes deeper. Generators that copy
    REST query names (`filter[id]`) or operators (`$match`) into property names hit this.

    ## Example
    ```json
    {"type": "object", "properties": {"filter[id]": {"type": "string"}}}
    ```

    Use instead (map the names back in the handler):
    ```json
    {"type": "object", "properties": {"filter.id": {"type": "string"}}}
    ```

    ## References
    - beautyfree/appstore-connect-mcp#1 (2026-03-31), #2 (2026-04-13): the 400 in Claude Code for
      `filter[...]` keys, "the session is permanently broken".
      https://github.com/beautyfree/appstore-connect-mcp/issues/1
    - erikmaday/unusual-whales-mcp#57 (2026-01-08): `rule_name[]` keys, 400 in Claude Code.
      https://github.com/erikmaday/unusual-whales-mcp/pull/57
    - decocms/studio#6874 (2026-09-02) and aws-solutions-library-samples/accelerated-intelligent-
      document-processing-on-aws#709 (2026-08-31): the API (and Bedrock) validate top-level keys only.
      https://github.com/decocms/studio/pull/6874
    """

    code = "SL022"
    name = "invalid-property-key"
    summary = "property name outside the Claude API's `^[a-zA-Z0-9_.-]{1,64}$` (top level: error)"
    severity: ClassVar[Mapping[str, Severity]] = _TOP
    keywords = frozenset({"properties"})

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        props = node.schema["properties"]
        if node.root != "inputSchema" or not isinstance(props, dict):
            return []
        bad = [k for k in props if not KEY.fullmatch(k)]
        if not bad:
            return []
        top = node.parent is None
        shown = ", ".join(repr(k) for k in bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else "")
        if top:
            message = (
                f"property name(s) {shown} outside ^[a-zA-Z0-9_.-]{{1,64}}$: the Claude API rejects "
                "the whole request"
            )
        else:
            message = (
                f"nested property name(s) {shown} outside ^[a-zA-Z0-9_.-]{{1,64}}$: the Claude API checks "
                "top-level keys only today (decocms#6874, 2026-09-02), so this passes for now"
            )
        return self.report(
            tool, f"{node.pointer}/properties/{escape(bad[0])}", message, _TOP if top else _NESTED
        )
