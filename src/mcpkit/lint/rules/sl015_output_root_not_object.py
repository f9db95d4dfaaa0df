"""SL015: outputSchema whose root is not an object, for protocol revisions that require it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import MISSING, Rule, ToolView, register
from mcpkit.lint._types import describe

#: Revisions whose schema restricts outputSchema to `type: "object"` at the root.
OBJECT_ONLY = frozenset({"2025-11-25"})


@register
class OutputRootNotObject(Rule):
    """## What it does
    Under protocol 2025-11-25 (the default), flags an `outputSchema` that is not an object schema
    with `"type": "object"` at its root. Under 2026-07-28, where any schema is allowed, it stays quiet.

    ## Why is this bad?
    The 2025-11-25 schema restricts `outputSchema` to an object root, and clients validate it: the
    TypeScript SDK rejects the whole `tools/list` result and Claude Code fails to load the tools
    ("expected \\"object\\"" at `outputSchema.type`). 2026-07-28 (SEP-2106) lifts the restriction, but
    clients on earlier revisions will still refuse it.

    ## Example
    ```json
    {"name": "list", "inputSchema": {"type": "object"},
     "outputSchema": {"type": "array", "items": {"type": "string"}}}
    ```

    Use instead:
    ```json
    {"name": "list", "inputSchema": {"type": "object"},
     "outputSchema": {"type": "object",
                      "properties": {"result": {"type": "array", "items": {"type": "string"}}}}}
    ```

    ## Fix
    `--fix` adds `"type": "object"` to an `outputSchema` root that has no `type` (structured content
    is always an object in 2025-11-25); other roots need the result wrapped by hand.

    ## References
    - MCP schema 2025-11-25: outputSchema "currently restricted to type: 'object' at the root".
      https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/schema/2025-11-25/schema.json
    - Wynelson94/longhand#9, #10: 12 of 19 tools fail to load in Claude Code.
      https://github.com/Wynelson94/longhand/issues/9
      https://github.com/Wynelson94/longhand/issues/10
    - anthropics/claude-code#10825: `invalid_literal` on `outputSchema.type`; mcpx#28 (reported).
      https://github.com/anthropics/claude-code/issues/10825
    """

    code = "SL015"
    name = "output-root-not-object"
    summary = "outputSchema whose root is not an object, for protocol revisions that require it"
    severity: ClassVar[Mapping[str, Severity]] = {
        "claude-code": "error",
        "cursor": "error",
        "vscode": "error",
        "windsurf": "error",
        "spec": "error",
    }
    fixable = True

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        schema = tool.output_schema
        if schema is MISSING or self.ctx.protocol not in OBJECT_ONLY:
            return
        if not isinstance(schema, dict):
            yield from self.report(
                tool, "/outputSchema", f"outputSchema is {describe(schema)}, not an object schema"
            )
        elif "type" not in schema:
            yield from self.report(tool, "/outputSchema", 'outputSchema has no root `"type": "object"`')
        elif schema["type"] != "object":
            yield from self.report(
                tool,
                "/outputSchema/type",
                f'outputSchema root type is {json.dumps(schema["type"])}, not "object" '
                "(allowed from 2026-07-28)",
            )
