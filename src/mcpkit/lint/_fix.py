"""`fix_tools`: the repairs that cannot change which arguments are valid, then a re-lint for the rest.

Each fix is a small pass over one root schema (`inputSchema` or `outputSchema`) that edits a deep
copy in place and returns what it changed:

- SL001/SL015: add a root `"type": "object"` (arguments and 2025-11-25 structured content are
  objects anyway);
- SL002: drop a draft-06/07 `$schema` after rewriting what 2020-12 spells differently, or an
  explicit 2020-12 one;
- SL011: `items` arrays become `prefixItems` (`additionalItems` becomes `items`);
- SL009: inline resolvable, non-recursive local `$ref`s and drop `$defs` nothing uses;
- SL004: add `"items": {}` to arrays without `items`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from mcpkit.lint._engine import lint_tools
from mcpkit.lint._finding import Finding
from mcpkit.lint._metaschema import dialect_of
from mcpkit.lint._refs import UNRESOLVED, is_local, recursive_refs, resolve
from mcpkit.lint._types import declared_types
from mcpkit.lint._walk import Node, walk

#: Keywords that only annotate: moving them between schemas cannot change validation.
ANNOTATIONS = frozenset(
    {"description", "title", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly"}
)
#: Keywords whose meaning depends on siblings in the same schema object.
_INTERACTING = (
    frozenset({"properties", "patternProperties", "additionalProperties"}),
    frozenset({"prefixItems", "items", "additionalItems"}),
    frozenset({"if", "then", "else"}),
    frozenset({"contains", "minContains", "maxContains"}),
)
_UNEVALUATED = frozenset({"unevaluatedProperties", "unevaluatedItems"})
_RESOURCE = frozenset(
    {"$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor", "$recursiveRef"}
)
_MAX_PASSES = 64


def fix_tools(
    tools: list[dict[str, Any]],
    *,
    profiles: Sequence[str] | None = None,
    protocol: str = "2025-11-25",
    instructions: str | None = None,
    server_name: str | None = None,
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Apply the meaning-preserving fixes to a copy of `tools` and lint the result.

    >>> fixed, left = fix_tools([{"name": "t", "description": "d", "inputSchema": {"properties": {}}}])
    >>> fixed[0]["inputSchema"], left
    ({'type': 'object', 'properties': {}}, [])

    Returns:
        The repaired tools (the input is not modified) and the findings that remain on them.
    """
    fixed, _ = apply_fixes(tools, protocol=protocol)
    left = lint_tools(
        fixed, profiles=profiles, protocol=protocol, instructions=instructions, server_name=server_name
    )
    return fixed, left


def apply_fixes(
    tools: list[dict[str, Any]], *, protocol: str = "2025-11-25"
) -> tuple[list[dict[str, Any]], list[str]]:
    """The repaired copy of `tools` and one line per change made (`tool /pointer: what`)."""
    fixed = copy.deepcopy(tools)
    changes: list[str] = []
    for index, tool in enumerate(fixed):
        if not isinstance(tool, dict):
            continue
        label = tool["name"] if isinstance(tool.get("name"), str) else f"tools[{index}]"
        notes: list[str] = []
        _fix_input_root(tool, notes)
        if protocol == "2025-11-25":
            _fix_output_root(tool, notes)
        for root in ("inputSchema", "outputSchema"):
            schema = tool.get(root)
            if isinstance(schema, dict):
                _fix_dialect(schema, root, notes)
                if dialect_of(schema).name == "2020-12":
                    _fix_tuple_items(schema, root, notes)
                _inline_refs(schema, root, notes)
                _add_items(schema, root, notes)
        changes.extend(f"{label} {note}" for note in notes)
    return fixed, changes


def _fix_input_root(tool: dict[str, Any], notes: list[str]) -> None:
    schema = tool.get("inputSchema")
    if "inputSchema" not in tool or schema is True:
        tool["inputSchema"] = {"type": "object"}
        notes.append('/inputSchema: wrote {"type": "object"}')
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if "type" not in schema:
            tool["inputSchema"] = {"type": "object", **schema}
            notes.append('/inputSchema: added "type": "object"')
        elif isinstance(kind, list) and "object" in kind:
            schema["type"] = "object"
            notes.append('/inputSchema/type: narrowed to "object"')


def _fix_output_root(tool: dict[str, Any], notes: list[str]) -> None:
    schema = tool.get("outputSchema")
    if isinstance(schema, dict) and "type" not in schema:
        tool["outputSchema"] = {"type": "object", **schema}
        notes.append('/outputSchema: added "type": "object"')


def _fix_dialect(schema: dict[str, Any], root: str, notes: list[str]) -> None:
    dialect = dialect_of(schema)
    if "$schema" not in schema or not dialect.known:
        return
    if dialect.name == "2020-12":
        del schema["$schema"]
        notes.append(f"/{root}: dropped the explicit 2020-12 $schema")
        return
    if dialect.name not in ("draft-07", "draft-06"):
        return
    nodes = walk(schema, root)
    for node in nodes:
        sub = node.schema
        if "$ref" in sub and sub.keys() - ANNOTATIONS - {"$ref", "$schema"}:
            return  # draft-07 ignores $ref siblings; 2020-12 would apply them
        if isinstance(sub.get("$id"), str) and sub["$id"].startswith("#"):
            return  # a draft-07 anchor has no 2020-12 spelling without $anchor semantics review
    for node in nodes:
        _tuple_to_prefix(node.schema)
        deps = node.schema.get("dependencies")
        if isinstance(deps, dict):
            required = {k: v for k, v in deps.items() if isinstance(v, list)}
            schemas = {k: v for k, v in deps.items() if not isinstance(v, list)}
            del node.schema["dependencies"]
            if required:
                node.schema["dependentRequired"] = required
            if schemas:
                node.schema["dependentSchemas"] = schemas
    del schema["$schema"]
    notes.append(f"/{root}: dropped the {dialect.name} $schema (rewritten as 2020-12)")


def _tuple_to_prefix(sub: dict[str, Any]) -> bool:
    if not isinstance(sub.get("items"), list):
        return False
    rest = sub.pop("additionalItems", None)
    sub["prefixItems"] = sub.pop("items")
    if rest is not None:
        sub["items"] = rest
    return True


def _fix_tuple_items(schema: dict[str, Any], root: str, notes: list[str]) -> None:
    for node in walk(schema, root):
        if _tuple_to_prefix(node.schema):
            notes.append(f"{node.pointer}: items array renamed to prefixItems")


def _merge(target: dict[str, Any], siblings: dict[str, Any], legacy: bool) -> dict[str, Any] | None:
    """`target` with the `$ref`'s siblings folded in, or `None` when that could change meaning."""
    if target.keys() & _RESOURCE:
        return None
    validating = siblings.keys() - ANNOTATIONS
    if validating and legacy:
        return None
    if (target.keys() & siblings.keys()) - ANNOTATIONS:
        return None
    if validating and (target.keys() | validating) & _UNEVALUATED:
        return None
    if any(target.keys() & group and validating & group for group in _INTERACTING):
        return None
    return {**copy.deepcopy(target), **siblings}


def _inline_refs(schema: dict[str, Any], root: str, notes: list[str]) -> None:
    if not any("$ref" in n.schema for n in walk(schema, root)):
        return
    legacy = dialect_of(schema).legacy
    recursive = recursive_refs(schema)
    for _ in range(_MAX_PASSES):
        changed = False
        for node in walk(schema, root):
            ref = node.schema.get("$ref")
            if not isinstance(ref, str) or not is_local(ref) or ref in recursive or node.schema is schema:
                continue
            target = resolve(schema, ref)
            if target is UNRESOLVED or not isinstance(target, dict):
                continue
            siblings = {k: v for k, v in node.schema.items() if k != "$ref"}
            merged = _merge(target, siblings, legacy)
            if merged is None:
                continue
            node.schema.clear()
            node.schema.update(merged)
            if not _inside_defs(node):
                notes.append(f"{node.pointer}: inlined $ref {ref}")
            changed = True
        if not changed:
            break
    body = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    if not any("$ref" in n.schema for n in walk(body, root)):
        for key in ("$defs", "definitions"):
            if schema.pop(key, None) is not None:
                notes.append(f"/{root}: dropped {key} (no $ref left)")


def _inside_defs(node: Node) -> bool:
    while node.parent is not None:
        if node.parent.parent is None:
            return node.via in ("$defs", "definitions")
        node = node.parent
    return False


def _add_items(schema: dict[str, Any], root: str, notes: list[str]) -> None:
    for node in walk(schema, root):
        types = declared_types(node.schema)
        if types and "array" in types and "items" not in node.schema:
            node.schema["items"] = {}
            notes.append(f"{node.pointer}: added items {{}}")
