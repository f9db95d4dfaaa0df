"""SL002: an inputSchema `$schema` of draft-07 or older, 2019-09, or unknown (outputSchema: SL021)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import escape

#: Claude's clients and API accept a draft-07 inputSchema today (only draft-07-only forms fail: SL011).
_LEGACY: dict[str, Severity] = {
    "claude-code": "warning",
    "claude-api": "warning",
    "gemini": "error",
    "spec": "warning",
}
_WARN_ALL: dict[str, Severity] = dict.fromkeys(
    ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "spec"), "warning"
)
_UNKNOWN: dict[str, Severity] = {**_WARN_ALL, "gemini": "error"}
CANONICAL = {
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}


@register
class SchemaDialect(Rule):
    """## What it does
    Checks the `$schema` of `inputSchema`: flags draft-07 and older dialects, 2019-09, URIs no
    validator knows, and (for Gemini, and as a note for older VS Code) any explicit `$schema`.
    `outputSchema` has its own rule, SL021, because clients treat the two differently.

    ## Why is this bad?
    A schema without `$schema` is JSON Schema 2020-12, the one dialect every MCP implementation must
    support; implementations must reject dialects they do not support. The evidence for input schemas
    is mixed and dated: in 2025 the Claude API refused some draft-07 input schemas, but reports from
    August 2026 show Claude Code and the Claude API accepting a draft-07 `$schema` on `inputSchema`
    and failing only on draft-07-only forms such as tuple `items` (SL011). So a draft-07 `inputSchema`
    is a warning for Claude, not an error. Gemini's legacy `parameters` reject `$schema` outright
    (an unknown field); older VS Code builds omitted tools that declared 2020-12 explicitly (info).

    ## Example
    ```json
    {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#", "properties": {}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {}}
    ```

    ## Fix
    `--fix` drops a draft-06/07 `$schema` when the schema means the same in 2020-12 (it rewrites
    `items` arrays to `prefixItems` and `dependencies` to `dependentRequired`/`dependentSchemas`, and
    refuses when a `$ref` has siblings, which draft-07 ignores), and drops an explicit 2020-12 one.

    ## References
    - MCP 2025-11-25, JSON Schema usage: default 2020-12; MUST support 2020-12; MUST error on unsupported
      dialects.
      https://modelcontextprotocol.io/specification/2025-11-25/basic
    - AlexGladkov/claude-in-mobile#57 (2026-08-15): every tool's inputSchema is draft-07; only the tuple
      `items` one makes the Claude API answer 400 (so a draft-07 `$schema` alone is accepted).
      https://github.com/AlexGladkov/claude-in-mobile/issues/57
    - anthropics/claude-code#8900 (2025-10-04): 400 "must match JSON Schema draft 2020-12" on an input
      schema (the older evidence for an error).
      https://github.com/anthropics/claude-code/issues/8900
    - microsoft/vscode#251315: tools declaring 2020-12 omitted (older builds).
      https://github.com/microsoft/vscode/issues/251315
    - Gemini Schema (docs): no `$schema` field in the legacy `parameters` subset.
      https://ai.google.dev/api/caching#Schema
    """

    code = "SL002"
    name = "unsupported-schema-dialect"
    summary = "inputSchema `$schema` declaring draft-07 or older, 2019-09, or an unknown dialect URI"
    severity: ClassVar[Mapping[str, Severity]] = _UNKNOWN
    fixable = True

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        schema, dialect = tool.input_schema, tool.input_dialect
        if not isinstance(schema, dict) or "$schema" not in schema:
            return
        path = f"/inputSchema/{escape('$schema')}"
        uri = dialect.declared
        if not dialect.known:
            hint = ""
            if isinstance(uri, str) and "draft-07" in uri:
                hint = f"; the draft-07 URI is {CANONICAL['draft-07']}"
            elif isinstance(uri, str) and "2020-12" in uri:
                hint = f"; the 2020-12 URI is {CANONICAL['2020-12']}"
            yield from self.report(
                tool,
                path,
                f"inputSchema declares an unknown dialect {uri}{hint}; validators such as Ajv refuse it",
                _UNKNOWN,
            )
        elif dialect.legacy:
            yield from self.report(
                tool,
                path,
                f"inputSchema declares {dialect.name}; MCP's dialect is 2020-12 (drop `$schema`). Claude "
                "accepts it today unless a draft-07-only form is used (claude-in-mobile#57, 2026-08-15); "
                "Gemini rejects `$schema`",
                _LEGACY,
            )
        elif dialect.name == "2019-09":
            yield from self.report(
                tool,
                path,
                "inputSchema declares 2019-09; only 2020-12 is guaranteed to be supported",
                {"claude-code": "warning", "claude-api": "warning", "gemini": "error", "spec": "warning"},
            )
        else:
            yield from self.report(
                tool,
                path,
                "inputSchema declares 2020-12 explicitly; Gemini rejects `$schema` and older VS Code "
                "omitted such tools (2020-12 is already the default)",
                {"gemini": "error", "vscode": "info"},
            )
