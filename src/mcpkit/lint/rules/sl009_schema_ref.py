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
_RECURSIVE: dict[str, Severity] = {"cursor": "warning", "gemini": "error"}
#: A resolvable local ref in inputSchema: Gemini's legacy subset has no `$ref` (docs); Cursor's support
#: is reported both ways (warning).
_ANY_REF: dict[str, Severity] = {"cursor": "warning", "gemini": "error"}
#: A ref that leads nowhere: validating clients fail the whole tools/list of the server.
_BROKEN_OUTPUT: dict[str, Severity] = dict.fromkeys(
    ("claude-code", "cursor", "vscode", "windsurf", "spec"), "error"
)


@register
class SchemaRef(Rule):
    """## What it does
    Resolves every `$ref`: flags references that lead nowhere, point outside the document, or recurse,
    and flags an `inputSchema` that uses local `$ref`s at all for the targets that cannot resolve
    them. Resolvable refs in `outputSchema` are fine: output schemas go to validators (which resolve
    local refs), never to a model.

    ## Why is this bad?
    A reference that leads nowhere makes validating clients fail the server's whole tool list:
    Claude Code shows "tools fetch failed: can't resolve reference #/$defs/ScreenInstance" (#76040,
    2026-07-09; #76881, 2026-07-12), and Kiro, opencode, Trae and Cursor failed on the same server
    (stitch-mcp#184, 2026-05-08/14). Gemini's legacy `parameters` have no `$ref` at all (docs).
    Whether Cursor resolves valid local refs is reported both ways (Kiro#10040, 2026-07-08, says
    Cursor and Claude Desktop handle them), so that is a warning. External references are worse:
    the 2026-07-28 spec says network `$ref`s MUST NOT be dereferenced by default and unresolved ones
    SHOULD be rejected. Recursive references cannot be
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
    - anthropics/claude-code#76040 (2026-07-09), #76881 (2026-07-12): an unresolvable ref fails the
      server's tool list.
      https://github.com/anthropics/claude-code/issues/76040
    - davideast/stitch-mcp#184 (2026-05-08; Cursor 3.4.17 on 2026-05-14), kirodotdev/Kiro#10040
      (2026-07-08): clients failing on, and resolving, `$defs`.
      https://github.com/davideast/stitch-mcp/issues/184
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
        broken = None if node.root == "inputSchema" else _BROKEN_OUTPUT
        if not is_local(ref):
            out += self.report(
                tool,
                path,
                f"external $ref {ref!r}: clients do not fetch it (and MUST NOT by default)",
                broken,
            )
            return out
        if resolve(root, ref) is UNRESOLVED:
            out += self.report(
                tool,
                path,
                f"$ref {ref!r} does not resolve inside the schema: validating clients fail the server's "
                'whole tool list ("can\'t resolve reference")',
                broken,
            )
            return out
        if node.root != "inputSchema":
            return out  # output schemas reach validators that resolve local refs, never a model
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
        schema = tool.input_schema
        if not isinstance(schema, dict):
            return
        count, first = self._seen.pop((tool.index, "inputSchema"), (0, ""))
        if not count:
            return  # `$defs` nothing refers to cannot break a resolver
        yield from self.report(
            tool,
            first,
            f"inputSchema uses {count} local $ref(s); Gemini's legacy `parameters` have no `$ref`, and "
            "Cursor has been reported both failing on and resolving them (inline them to be safe)",
            _ANY_REF,
        )
