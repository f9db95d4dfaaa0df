"""SL009: `$ref` unresolved, external or recursive; `$ref`/`$defs` where clients cannot resolve them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._refs import UNRESOLVED, is_local, recursive_refs, resolve
from mcpkit.lint._rule import Rule, ToolView, register
from mcpkit.lint._walk import Node, escape

_EVERYONE: dict[str, Severity] = dict.fromkeys(
    ("claude-code", "claude-api", "cursor", "vscode", "windsurf", "openai-strict", "gemini", "spec"), "error"
)
_RECURSIVE: dict[str, Severity] = {"cursor": "error", "gemini": "error", "claude-code": "warning"}
_ANY_REF: dict[str, Severity] = {"cursor": "error", "gemini": "error", "claude-code": "warning"}


@register
class SchemaRef(Rule):
    """## What it does
    Resolves every `$ref`: flags references that lead nowhere, point outside the document, or recurse,
    and flags a schema that uses `$ref`/`$defs` at all for the clients that cannot resolve them.

    ## Why is this bad?
    Several clients pass schemas to models or validators that do not resolve references: Cursor
    reports "can't resolve reference #/$defs/…", Gemini's legacy `parameters` have no `$ref`, and
    Kiro, opencode and Azure AI Foundry fail similarly; Claude Code has lost parameters of tools using
    them. External references are worse: the 2026-07-28 spec says network `$ref`s MUST NOT be
    dereferenced by default and unresolved ones SHOULD be rejected. Recursive references cannot be
    inlined at all. Pydantic emits `$defs` for every nested model; the official SDK passes them on.

    ## Example
    ```json
    {"type": "object", "properties": {"user": {"$ref": "#/$defs/User"}},
     "$defs": {"User": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    ```

    Use instead:
    ```json
    {"type": "object", "properties": {"user": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    ```

    ## Fix
    `--fix` inlines resolvable, non-recursive local references (merging siblings only when that
    cannot change meaning) and drops `$defs`/`definitions` that nothing uses any more.

    ## References
    - MCP 2026-07-28 (SEP-2106): network `$ref`s MUST NOT be dereferenced by default; unresolved external
      refs SHOULD be rejected.
      https://modelcontextprotocol.io/specification/draft/basic
    - stitch-mcp#184, new-foundry-portal#23, basemind#50 (reported): Cursor, Kiro, opencode and Azure
      Foundry fail on `$defs`.
    - Gemini Schema: no `$ref` in the legacy `parameters` subset.
      https://ai.google.dev/api/caching#Schema
    """

    code = "SL009"
    name = "schema-ref"
    summary = (
        "`$ref` unresolved, external or recursive; `$ref`/`$defs` present where clients cannot resolve them"
    )
    severity: ClassVar[Mapping[str, Severity]] = _EVERYONE
    fixable = True
    keywords = frozenset({"$ref"})

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._recursive: dict[int, set[str]] = {}
        # Resolvable local refs check_node saw, per (tool index, root): (count, first pointer).
        self._seen: dict[tuple[int, str], tuple[int, str]] = {}

    def check_node(self, tool: ToolView, node: Node) -> list[Finding]:
        out: list[Finding] = []
        ref = node.schema["$ref"]
        if not isinstance(ref, str):
            return out
        path = node.pointer + "/" + escape("$ref")
        root = tool.root(node)
        if not is_local(ref):
            out += self.report(
                tool, path, f"external $ref {ref!r}: clients do not fetch it (and MUST NOT by default)"
            )
            return out
        if resolve(root, ref) is UNRESOLVED:
            out += self.report(tool, path, f"$ref {ref!r} does not resolve inside the schema")
            return out
        count, first = self._seen.get((tool.index, node.root), (0, path))
        self._seen[(tool.index, node.root)] = (count + 1, first)
        key = id(root)
        if key not in self._recursive:
            self._recursive[key] = recursive_refs(root)
        if ref in self._recursive[key]:
            out += self.report(
                tool, path, f"recursive $ref {ref!r}: clients that inline refs cannot", _RECURSIVE
            )
        return out

    def check_tool(self, tool: ToolView) -> Iterator[Finding]:
        for root, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
            if not isinstance(schema, dict):
                continue
            count, first = self._seen.pop((tool.index, root), (0, ""))
            defs = [k for k in ("$defs", "definitions") if k in schema]
            if not count and not defs:
                continue
            where = first or f"/{root}/{escape(defs[0])}"
            what = f"{count} $ref(s)" if count else f"`{defs[0]}` without any $ref"
            levels = _ANY_REF if root == "inputSchema" else {"cursor": "error", "claude-code": "warning"}
            yield from self.report(
                tool,
                where,
                f"{root} uses {what}; Cursor and Gemini cannot resolve them (inline them)",
                levels,
            )
