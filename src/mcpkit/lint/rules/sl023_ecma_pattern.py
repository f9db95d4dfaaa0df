"""SL023: a `pattern` (or `patternProperties` key) that is not a valid ECMA-262 regular expression."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._ecma import ecma_error
from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node, escape

_CLIENTS: dict[str, Severity] = dict.fromkeys(("claude-code", "cursor", "vscode", "windsurf"), "warning")
_INPUT: dict[str, Severity] = {**_CLIENTS, "spec": "error"}
_OUTPUT: dict[str, Severity] = {"claude-code": "warning", "spec": "error"}


@register
class EcmaPattern(Rule):
    """## What it does
    Compiles every `pattern` and every `patternProperties` key the way JavaScript clients do,
    `new RegExp(p, "u")`, with an ECMA-262 engine (the `regress` package), and flags the ones that
    throw, with a hint when the pattern is written in Python's dialect.

    ## Why is this bad?
    JSON Schema defines `pattern` as an ECMA-262 regular expression, and a schema with an invalid one
    is not valid (the spec says schemas MUST be valid). Validators built on Ajv compile patterns as
    `new RegExp(p, "u")`: Python idioms such as `(?i)` or `(?P<name>...)`, and escapes the `u` flag
    forbids (`\\-` outside a class), throw there, so the schema does not compile and the tool cannot
    be validated or called. Python's `re` is the wrong judge both ways (it accepts `(?i)`, rejects
    `\\p{L}`), which is why mcpkit no longer uses it for this.

    ## Example
    ```json
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?i)^[a-z]{3}$"}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Za-z]{3}$"}}}
    ```

    ## References
    - JSON Schema 2020-12 Validation, `pattern`: an ECMA-262 regular expression.
      https://json-schema.org/draft/2020-12/json-schema-validation#section-6.3.3
    - Ajv: patterns compiled with `new RegExp(pattern, "u")` (the `unicodeRegExp` option, on by default).
      https://ajv.js.org/options.html#unicoderegexp
    - MCP 2025-11-25, JSON Schema usage: schemas MUST be valid in their dialect.
      https://modelcontextprotocol.io/specification/2025-11-25/basic
    """

    code = "SL023"
    name = "invalid-ecma-pattern"
    summary = '`pattern` or `patternProperties` key that `new RegExp(p, "u")` would reject'
    severity: ClassVar[Mapping[str, Severity]] = _INPUT
    keywords = frozenset({"pattern", "patternProperties"})

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        levels = _INPUT if node.root == "inputSchema" else _OUTPUT
        pattern = node.schema.get("pattern")
        if isinstance(pattern, str):
            error = ecma_error(pattern)
            if error:
                out += self.report(
                    tool,
                    node.pointer + "/pattern",
                    f'pattern {pattern!r} is not ECMA-262 (new RegExp(p, "u") throws: {error})',
                    levels,
                )
        keys = node.schema.get("patternProperties")
        if isinstance(keys, dict):
            for key in keys:
                error = ecma_error(key)
                if error:
                    out += self.report(
                        tool,
                        f"{node.pointer}/patternProperties/{escape(key)}",
                        f"patternProperties key {key!r} is not ECMA-262 ({error})",
                        levels,
                    )
        return out
