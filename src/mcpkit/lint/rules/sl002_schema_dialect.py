"""SL002: `$schema` declaring draft-07 (or older), a dialect clients lack, or an unknown URI."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import escape

_ALL_ERROR: dict[str, Severity] = dict.fromkeys(
    ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "gemini", "spec"), "error"
)
_CANONICAL = {
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}


@register
class SchemaDialect(Rule):
    """## What it does
    Checks the `$schema` of `inputSchema` and `outputSchema`: flags draft-07 and older dialects,
    2019-09, URIs no validator knows, and (for Gemini and older VS Code) any explicit `$schema`.

    ## Why is this bad?
    A schema without `$schema` is JSON Schema 2020-12, the one dialect every MCP implementation must
    support; implementations must reject dialects they do not support. Claude Code's validator is
    2020-12 only and fails at call time on a draft-07 `outputSchema`; the Claude API rejects draft-07
    input schemas; Gemini's legacy `parameters` reject `$schema` outright; older VS Code builds omitted
    tools that declared 2020-12 explicitly. An unknown URI (a typo, `https` for draft-07) is rejected
    by validators such as Ajv.

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
    - anthropics/claude-code#88882, #586: 2020-12-only validation of draft-07 schemas.
      https://github.com/anthropics/claude-code/issues/88882
      https://github.com/anthropics/claude-code/issues/586
    - modelcontextprotocol/typescript-sdk#745: draft-07 vs 2020-12 in the SDK's validator.
      https://github.com/modelcontextprotocol/typescript-sdk/issues/745
    - microsoft/vscode#251315: tools declaring 2020-12 omitted.
      https://github.com/microsoft/vscode/issues/251315
    - CLIProxyAPI#97 (reported): Gemini rejects `$schema` in function parameters.
    """

    code = "SL002"
    name = "unsupported-schema-dialect"
    summary = "`$schema` declaring draft-07 or older, 2019-09, or an unknown dialect URI"
    severity: ClassVar[Mapping[str, Severity]] = _ALL_ERROR
    fixable = True

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        for root, schema, dialect in (
            ("inputSchema", tool.input_schema, tool.input_dialect),
            ("outputSchema", tool.output_schema, tool.output_dialect),
        ):
            if not isinstance(schema, dict) or "$schema" not in schema:
                continue
            path = f"/{root}/{escape('$schema')}"
            uri = dialect.declared
            is_input = root == "inputSchema"
            if not dialect.known:
                hint = ""
                if isinstance(uri, str) and "draft-07" in uri:
                    hint = f"; the draft-07 URI is {_CANONICAL['draft-07']}"
                elif isinstance(uri, str) and "2020-12" in uri:
                    hint = f"; the 2020-12 URI is {_CANONICAL['2020-12']}"
                levels = (
                    dict(_ALL_ERROR)
                    if is_input
                    else dict.fromkeys(("claude-code", "cursor", "vscode", "windsurf", "spec"), "error")
                )
                yield from self.report(tool, path, f"{root} declares an unknown dialect {uri}{hint}", levels)
            elif dialect.legacy:
                levels = {"claude-code": "error", "spec": "warning"}
                if is_input:
                    levels |= {"claude-api": "error", "gemini": "error"}
                yield from self.report(
                    tool,
                    path,
                    f"{root} declares {dialect.name}; Claude's validators are 2020-12 only "
                    "(drop `$schema` to mean 2020-12)",
                    levels,
                )
            elif dialect.name == "2019-09":
                levels = {"claude-code": "warning", "spec": "warning"}
                if is_input:
                    levels |= {"claude-api": "warning", "gemini": "error"}
                yield from self.report(
                    tool, path, f"{root} declares 2019-09; only 2020-12 is guaranteed to be supported", levels
                )
            elif is_input:
                yield from self.report(
                    tool,
                    path,
                    "inputSchema declares 2020-12 explicitly; Gemini rejects `$schema` and older VS Code "
                    "omitted such tools (2020-12 is already the default)",
                    {"gemini": "error", "vscode": "info"},
                )
