"""SL003: composition (`anyOf`/`oneOf`/`allOf`/`not`/`if`) at the root of inputSchema."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import Rule, ToolView, register

_UNIONS: dict[str, Severity] = {
    "claude-code": "error",
    "claude-api": "error",
    "cursor": "error",
    "openai-strict": "error",
}
_CONDITIONALS: dict[str, Severity] = {"claude-code": "warning", "openai-strict": "error"}


@register
class RootComposition(Rule):
    """## What it does
    Flags `anyOf`, `oneOf`, `allOf`, `not` and `if` at the root of a tool's `inputSchema`.

    ## Why is this bad?
    The Claude API answers 400 "input_schema does not support oneOf, allOf, or anyOf at the top
    level", which fails every request that carries the tool list, so one such tool breaks a whole
    Claude Code session (and its sub-agents). Claude Code has silently dropped tools whose root uses
    `allOf` with `if`/`then`. Cursor's model gateway rejects the request, and OpenAI strict mode
    requires a plain object root. `not` and `if` pass the Claude API at the root (a warning for
    Claude Code, which has dropped such roots) but OpenAI strict mode does not support them.

    ## Example
    ```json
    {"type": "object", "anyOf": [{"required": ["id"]}, {"required": ["slug"]}],
     "properties": {"id": {"type": "string"}, "slug": {"type": "string"}}}
    ```

    Use instead (check "one of" in the handler, say it in the description):
    ```json
    {"type": "object", "properties": {"id": {"type": "string", "description": "id or slug"},
     "slug": {"type": "string"}}}
    ```

    ## References
    - anthropics/claude-code#5319, #4886: the Claude API 400 at the top level.
      https://github.com/anthropics/claude-code/issues/5319
      https://github.com/anthropics/claude-code/issues/4886
    - anthropics/claude-code#95504: tools with a root `allOf`/`if`/`then` silently dropped.
      https://github.com/anthropics/claude-code/issues/95504
    - code-yeongyu/senpi#952: Cursor's gateway rejects the request on composition.
      https://github.com/code-yeongyu/senpi/issues/952
    - perplexityai/modelcontextprotocol#57 (reported): the same fix in another server.
    - OpenAI structured outputs: the root must be an object, not `anyOf`.
      https://platform.openai.com/docs/guides/structured-outputs
    """

    code = "SL003"
    name = "root-composition"
    summary = "composition (`anyOf`/`oneOf`/`allOf`/`not`/`if`) at the root of inputSchema"
    severity: ClassVar[Mapping[str, Severity]] = _UNIONS

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        schema = tool.input_schema
        if not isinstance(schema, dict):
            return
        for keyword in ("anyOf", "oneOf", "allOf", "not", "if"):
            if keyword in schema:
                levels = _UNIONS if keyword in ("anyOf", "oneOf", "allOf") else _CONDITIONALS
                yield from self.report(
                    tool,
                    f"/inputSchema/{keyword}",
                    f"`{keyword}` at the root of inputSchema; move the alternatives into properties "
                    "and check them in the handler",
                    levels,
                )
