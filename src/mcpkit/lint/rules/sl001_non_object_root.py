"""SL001: inputSchema missing, not an object, or without `"type": "object"` at the root."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import MISSING, Rule, ToolView, register
from mcpkit.lint._types import describe


@register
class NonObjectRoot(Rule):
    """## What it does
    Checks that every tool has an `inputSchema`, that it is a JSON object, and that its root says
    `"type": "object"`.

    ## Why is this bad?
    The MCP schema makes `inputSchema` required with `type: "object"` at the root, and clients built on
    the TypeScript SDK validate the whole `tools/list` result against it: one tool without the root type
    fails the list. Claude Code then drops every tool of that server silently, not just the bad one.

    ## Example
    ```json
    {"name": "search", "inputSchema": {"properties": {"q": {"type": "string"}}}}
    ```

    Use instead:
    ```json
    {"name": "search", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    ```

    ## Fix
    `--fix` adds `"type": "object"` when the root has no `type` (or a type list that contains
    `"object"`), and writes `{"type": "object"}` for a missing or `true` schema: tool arguments are
    always an object, so this cannot change which calls are valid.

    ## References
    - MCP schema 2025-11-25, `Tool.inputSchema`: `type: "object"` required at the root.
      https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/schema/2025-11-25/schema.json
    - anthropics/claude-code#88049: one non-object `inputSchema` silently drops all tools of an HTTP
      server.
      https://github.com/anthropics/claude-code/issues/88049
    - anthropics/claude-code#28620: a root `anyOf` without `type` fails `tools/list` in a TypeScript-SDK
      client (`expected "object"`).
      https://github.com/anthropics/claude-code/issues/28620
    - gitlab-mcp#286 (reported): the same failure in another server.
    """

    code = "SL001"
    name = "non-object-root"
    summary = 'inputSchema missing, not an object, or without `"type": "object"` at the root'
    severity: ClassVar[Mapping[str, Severity]] = {
        "claude-code": "error",
        "claude-api": "error",
        "cursor": "error",
        "vscode": "error",
        "windsurf": "error",
        "openai-strict": "error",
        "gemini": "error",
        "spec": "error",
    }
    fixable = True

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        schema = tool.input_schema
        if schema is MISSING:
            yield from self.report(tool, "/inputSchema", "the tool has no inputSchema; every tool needs one")
        elif not isinstance(schema, dict):
            yield from self.report(
                tool, "/inputSchema", f"inputSchema is {describe(schema)}, not an object schema"
            )
        elif "type" not in schema:
            yield from self.report(tool, "/inputSchema", 'inputSchema has no root `"type": "object"`')
        elif schema["type"] != "object":
            yield from self.report(
                tool,
                "/inputSchema/type",
                f'inputSchema root type is {json.dumps(schema["type"])}, not "object"',
            )
