"""SL010: a schema that is not valid against its dialect's metaschema."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._metaschema import metaschema_checker, metaschema_errors
from mcpkit.lint._rule import MISSING, Rule, ToolView, register
from mcpkit.lint._walk import pointer


@register
class MetaschemaInvalid(Rule):
    """## What it does
    Validates `inputSchema` and `outputSchema` against the metaschema of the dialect they declare
    (2020-12 when they declare none), with the `jsonschema` package's own metaschemas and format
    checks (so an invalid `pattern` regex counts).

    ## Why is this bad?
    The spec says schemas MUST be valid in their dialect. The Claude API answers 400 "JSON schema is
    invalid. It must match JSON Schema draft 2020-12" for the whole request, so one invalid tool breaks
    every turn; validating clients fail to compile the schema and drop the tool.

    ## Example
    ```json
    {"type": "object", "properties": {"n": {"type": "int", "minimum": "0"}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
    ```

    ## References
    - MCP 2025-11-25, JSON Schema usage: schemas MUST be valid against their declared or default dialect.
      https://modelcontextprotocol.io/specification/2025-11-25/basic
    - afrise/MCPSharp#9: "JSON schema is invalid. It must match JSON Schema draft 2020-12".
      https://github.com/afrise/MCPSharp/issues/9
    - mcp-docling#5, kintone/mcp-server#547 (reported): the same 400 failing every request.
    """

    code = "SL010"
    name = "metaschema-invalid"
    summary = "schema not valid against its dialect's metaschema"
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

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        for root, schema, dialect in (
            ("inputSchema", tool.input_schema, tool.input_dialect),
            ("outputSchema", tool.output_schema, tool.output_dialect),
        ):
            if isinstance(schema, bool) and schema is not MISSING:
                for rel, message in metaschema_errors(dialect, schema):
                    yield from self.report(tool, pointer((root, *rel)), message)
        dialects = {"inputSchema": tool.input_dialect, "outputSchema": tool.output_dialect}
        checkers = {root: metaschema_checker(d) for root, d in dialects.items()}
        for node in tool.nodes:
            dialect = dialects[node.root]
            errors = checkers[node.root](node.schema)
            if not errors:
                continue
            tuple_reported = isinstance(node.schema.get("items"), list) and not dialect.tuple_items
            for rel, message in errors:
                if tuple_reported and rel[:1] == ("items",):
                    continue  # SL011 says it better, and --fix repairs it
                yield from self.report(
                    tool,
                    pointer((*node.parts, *rel)),
                    f"invalid against the {dialect.name} metaschema: {message}",
                    self._levels(node.root),
                )

    def _levels(self, root: str) -> dict[str, str] | None:
        if root == "inputSchema":
            return None
        return dict.fromkeys(("claude-code", "cursor", "vscode", "windsurf", "spec"), "error")
