"""SL020: keywords a target profile does not support."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._rule import LintContext, Rule, ToolView, register
from mcpkit.lint._walk import Node, escape

#: Gemini's legacy `parameters` Schema fields; anything else is "Unknown name".
GEMINI_KNOWN = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
#: Reported by other rules for Gemini (SL002, SL009, SL016).
_GEMINI_ELSEWHERE = frozenset({"$schema", "$ref", "$defs", "definitions", "const"})
_GEMINI_QUIET = GEMINI_KNOWN | _GEMINI_ELSEWHERE
#: Keywords OpenAI strict mode rejects.
OPENAI_UNSUPPORTED = frozenset(
    {
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "default",
    }
)
#: Composition Cursor's gateway rejects below the root (SL003 covers the root).
CURSOR_UNSUPPORTED = frozenset({"anyOf", "oneOf", "allOf"})


@register
class UnsupportedKeyword(Rule):
    """## What it does
    Flags keywords the selected targets do not support: anything outside Gemini's legacy Schema
    fields, the keywords OpenAI strict mode rejects, and `anyOf`/`oneOf`/`allOf` below the root for
    Cursor.

    ## Why is this bad?
    Gemini's `functionDeclarations[].parameters` is an OpenAPI subset: an unknown field fails the
    whole request ("Invalid JSON payload received. Unknown name \\"additionalProperties\\""); only the
    newer `parametersJsonSchema` field takes full JSON Schema. OpenAI strict mode rejects
    `patternProperties`, `allOf`, `default` and friends. Cursor's model gateway has answered 400 for
    any tool schema with `anyOf`/`oneOf`/`allOf`, which Pydantic and FastMCP emit for every
    `Optional` field. Note that no object schema satisfies both `openai-strict` (which demands
    `additionalProperties: false`) and `gemini` (whose legacy schema has no such field): lint for
    the targets your users have.

    ## Example
    ```json
    {"type": "object", "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}}}
    ```

    Use instead (for Gemini):
    ```json
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}
    ```

    ## References
    - Gemini Schema: the supported fields.
      https://ai.google.dev/api/caching#Schema
    - nanbingxyz/5ire#42: `Unknown name "additionalProperties"`; gemini-cli#4196 (reported).
      https://github.com/nanbingxyz/5ire/issues/42
    - OpenAI structured outputs, supported schemas: unsupported keywords.
      https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
    - code-yeongyu/senpi#952, can1357/oh-my-pi#10432: Cursor 400 on composition anywhere.
      https://github.com/code-yeongyu/senpi/issues/952
      https://github.com/can1357/oh-my-pi/issues/10432
    """

    code = "SL020"
    name = "unsupported-keyword"
    summary = "keywords a target profile does not support (Gemini's subset, OpenAI strict, Cursor)"
    severity: ClassVar[Mapping[str, Severity]] = {
        "gemini": "error",
        "openai-strict": "error",
        "cursor": "warning",
    }

    def __init__(self, ctx: LintContext) -> None:
        super().__init__(ctx)
        selected = ctx.profiles
        self._gemini = "gemini" in selected
        self._openai = "openai-strict" in selected
        self._cursor = "cursor" in selected
        # Gemini needs every key of every node (check_tool); the others only named keywords.
        if not self._gemini:
            self.keywords = (OPENAI_UNSUPPORTED if self._openai else frozenset()) | (
                CURSOR_UNSUPPORTED if self._cursor else frozenset()
            )

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        return self._emit(tool, node, self._hits(node))

    def check_tool(self, tool: ToolView) -> list[Finding]:
        if not self._gemini:
            return []
        out: list[Finding] = []
        for node in tool.nodes:
            hits = self._hits(node)
            if hits:
                out += self._emit(tool, node, hits)
        return out

    def _hits(self, node: Node) -> dict[str, dict[str, Severity]]:
        hits: dict[str, dict[str, Severity]] = {}
        if node.root != "inputSchema":
            return hits
        keys = node.schema.keys()
        if self._gemini and not keys <= _GEMINI_QUIET:
            for key in keys - _GEMINI_QUIET:
                hits.setdefault(key, {})["gemini"] = "error"
        if self._openai and not keys.isdisjoint(OPENAI_UNSUPPORTED):
            for key in keys & OPENAI_UNSUPPORTED:
                hits.setdefault(key, {})["openai-strict"] = "error"
        if self._cursor and node.parent is not None and not keys.isdisjoint(CURSOR_UNSUPPORTED):
            for key in keys & CURSOR_UNSUPPORTED:
                hits.setdefault(key, {})["cursor"] = "warning"
        return hits

    def _emit(self, tool: ToolView, node: Node, hits: dict[str, dict[str, Severity]]) -> list[Finding]:
        out: list[Finding] = []
        for key in node.schema:
            if key in hits:
                who = ", ".join(sorted(hits[key]))
                out += self.report(
                    tool, f"{node.pointer}/{escape(key)}", f"`{key}` is not supported by {who}", hits[key]
                )
        return out
