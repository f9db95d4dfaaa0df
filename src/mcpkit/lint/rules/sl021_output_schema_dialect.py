"""SL021: an outputSchema `$schema` other than 2020-12 (Claude Code and Claude Desktop refuse the tool)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import escape
from mcpkit.lint.rules.sl002_schema_dialect import CANONICAL

_REFUSED: dict[str, Severity] = {"claude-code": "error", "spec": "warning"}


@register
class OutputSchemaDialect(Rule):
    """## What it does
    Checks the `$schema` of `outputSchema`: flags draft-07 and older, 2019-09, and URIs no validator
    knows. An explicit 2020-12 `$schema` is fine.

    ## Why is this bad?
    Clients validate `structuredContent` against `outputSchema`, so they compile it. Since the
    Claude Desktop / Claude Code update of 13-14 August 2026 their validator is 2020-12 only and
    refuses every tool whose `outputSchema` declares draft-07 ("Tool 'X' has an invalid outputSchema:
    JSON Schema declares an unsupported dialect"): `tools/list` succeeds, and the call fails. The
    official TypeScript SDK emits draft-07 by default when it converts Zod output schemas, so the
    reference servers themselves are hit. The spec makes 2020-12 the default and MUST-support dialect.

    ## Example
    ```json
    {"name": "stat", "inputSchema": {"type": "object"},
     "outputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}}
    ```

    Use instead:
    ```json
    {"name": "stat", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}
    ```

    ## Fix
    `--fix` drops a draft-06/07 `$schema` when the schema means the same in 2020-12 (as for SL002).

    ## References
    - anthropics/claude-code#88882 (2026-08-22, open): draft-07 outputSchema rejected; current
      `server-filesystem` unusable.
      https://github.com/anthropics/claude-code/issues/88882
    - n8n-io/n8n#36361 (2026-08-15): every tool rejected by Claude Desktop 1.30096 and Claude Code.
      https://github.com/n8n-io/n8n/issues/36361
    - bloknayrb/tandem#1564 (2026-08-19), verygoodplugins/mcp-freescout#73 (2026-08-13),
      shashankswe2020-ux/whoop-mcp#251 (2026-09-21, Claude Desktop 2.2553.1): the same error.
      https://github.com/bloknayrb/tandem/issues/1564
    - MCP 2025-11-25, JSON Schema usage: 2020-12 is the default.
      https://modelcontextprotocol.io/specification/2025-11-25/basic
    """

    code = "SL021"
    name = "output-schema-dialect"
    summary = "outputSchema `$schema` other than 2020-12 (Claude's 2020-12-only validator refuses the tool)"
    severity: ClassVar[Mapping[str, Severity]] = _REFUSED
    fixable = True

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        schema, dialect = tool.output_schema, tool.output_dialect
        if not isinstance(schema, dict) or "$schema" not in schema or dialect.name == "2020-12":
            return
        path = f"/outputSchema/{escape('$schema')}"
        if not dialect.known:
            uri = dialect.declared
            hint = f"; the 2020-12 URI is {CANONICAL['2020-12']}" if "2020-12" in str(uri) else ""
            what = f"an unknown dialect {uri}{hint}"
        else:
            what = dialect.name
        yield from self.report(
            tool,
            path,
            f"outputSchema declares {what}; Claude Code and Claude Desktop validate output schemas as "
            "2020-12 only and refuse the tool at call time (drop `$schema`)",
        )
