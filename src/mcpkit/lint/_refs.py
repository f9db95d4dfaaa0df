"""Local `$ref` resolution: pointers (`#/$defs/x`), anchors (`#name`), and recursion detection."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from mcpkit.lint._walk import walk

#: Returned by `resolve` when a reference does not lead anywhere.
UNRESOLVED: Any = object()


def is_local(ref: str) -> bool:
    """Whether `ref` points into the same document (`#...`)."""
    return ref.startswith("#")


def resolve(root: Any, ref: str) -> Any:
    """The subschema a local `ref` points to inside `root`, or `UNRESOLVED`.

    >>> resolve({"$defs": {"a/b": {"type": "string"}}}, "#/$defs/a~1b")
    {'type': 'string'}
    """
    if not is_local(ref):
        return UNRESOLVED
    fragment = unquote(ref[1:])
    if fragment == "":
        return root
    if not fragment.startswith("/"):
        return _anchor(root, fragment)
    node = root
    for token in fragment[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return UNRESOLVED
    return node


def _anchor(root: Any, name: str) -> Any:
    for node in walk(root, ""):
        if node.schema.get("$anchor") == name or node.schema.get("$id") == "#" + name:
            return node.schema
    return UNRESOLVED


def recursive_refs(root: Any) -> set[str]:
    """Local refs in `root` whose expansion never ends (a target that reaches itself).

    >>> sorted(recursive_refs({"$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}}))
    ['#/$defs/n']
    """
    refs_below: dict[int, list[str]] = {}
    verdict: dict[str, bool] = {}

    def refs_in(target: Any) -> list[str]:
        key = id(target)
        if key not in refs_below:
            refs_below[key] = [
                n.schema["$ref"]
                for n in walk(target, "")
                if isinstance(n.schema.get("$ref"), str) and is_local(n.schema["$ref"])
            ]
        return refs_below[key]

    def cycles(ref: str, stack: tuple[int, ...]) -> bool:
        target = resolve(root, ref)
        if target is UNRESOLVED or not isinstance(target, dict):
            return False
        if id(target) in stack:
            return True
        if ref in verdict:
            return verdict[ref]
        verdict[ref] = False  # provisional, breaks re-entry
        found = any(cycles(inner, (*stack, id(target))) for inner in refs_in(target))
        verdict[ref] = found
        return found

    out: set[str] = set()
    for ref in refs_in(root):
        if ref == "#" or cycles(ref, ()):
            out.add(ref)
    return out
