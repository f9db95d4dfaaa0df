"""One pass over a JSON Schema: every object subschema with its JSON pointer, in document order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Keywords whose value maps names to subschemas.
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
#: Keywords whose value is a list of subschemas.
SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
#: Keywords whose value is one subschema (`items` may also be a tuple list; `dependencies` a map).
SCHEMA_SINGLE = frozenset(
    {
        "additionalProperties",
        "propertyNames",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "additionalItems",
        "contentSchema",
    }
)
CHILD_KEYWORDS = SCHEMA_MAPS | SCHEMA_LISTS | SCHEMA_SINGLE | {"items", "dependencies"}
_CHILDLESS = CHILD_KEYWORDS.isdisjoint
#: Hops that nest data (an object inside an object or an array), for nesting-depth limits.
_NESTING = frozenset({"properties", "patternProperties", "additionalProperties", "items", "prefixItems"})
#: A walk stops after this many nodes (a cyclic Python structure would never end).
MAX_NODES = 1_000_000
_DEFS = frozenset({"$defs", "definitions"})

Part = str | int


def escape(part: Part) -> str:
    """Escape one reference token for a JSON pointer (RFC 6901)."""
    text = str(part)
    if "~" in text or "/" in text:
        return text.replace("~", "~0").replace("/", "~1")
    return text


def pointer(parts: Iterable[Part]) -> str:
    """Join reference tokens into a JSON pointer.

    >>> pointer(["inputSchema", "properties", "a/b"])
    '/inputSchema/properties/a~1b'
    """
    return "".join("/" + escape(p) for p in parts)


_NO_NAME: Any = object()


class Node:
    """An object subschema met on the walk.

    Attributes:
        schema: the subschema itself (a dict; boolean subschemas are not nodes).
        parent: the node it sits in (`None` at the root).
        via: the keyword that led here (`""` at the root).
        depth: data nesting level, 1 at the root, +1 through `properties`, `items` and the like.
        root: `inputSchema` or `outputSchema`.
    """

    __slots__ = ("depth", "name", "parent", "root", "schema", "via")

    def __init__(
        self, schema: dict[str, Any], parent: Node | None, via: str, name: Any, depth: int, root: str
    ) -> None:
        self.schema = schema
        self.parent = parent
        self.via = via
        self.name = name
        self.depth = depth
        self.root = root

    @property
    def parts(self) -> tuple[Part, ...]:
        """Reference tokens from the tool to this subschema, starting with `root`."""
        out: list[Part] = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            if node.name is not _NO_NAME:
                out.append(node.name)
            out.append(node.via)
            node = node.parent
        out.append(self.root)
        out.reverse()
        return tuple(out)

    @property
    def pointer(self) -> str:
        """The JSON pointer from the tool to this subschema."""
        return pointer(self.parts)

    def __repr__(self) -> str:
        return f"Node({self.pointer!r})"


def walk(schema: Any, root: str) -> list[Node]:
    """Every object subschema of `schema`, parents before children, in document order.

    >>> [n.pointer for n in walk({"type": "object", "properties": {"a": {"type": "string"}}}, "inputSchema")]
    ['/inputSchema', '/inputSchema/properties/a']
    """
    if not isinstance(schema, dict):
        return []
    out: list[Node] = []
    stack = [Node(schema, None, "", _NO_NAME, 1, root)]
    while stack:
        node = stack.pop()
        out.append(node)
        sub = node.schema
        if _CHILDLESS(sub.keys()):
            continue
        if len(out) > MAX_NODES:
            break
        depth = node.depth
        children: list[Node] = []
        for key, value in sub.items():
            if key not in CHILD_KEYWORDS:
                continue
            level = depth + 1 if key in _NESTING else (1 if key in _DEFS else depth)
            if key in SCHEMA_MAPS or key == "dependencies":
                if value.__class__ is dict:
                    for name, child in value.items():
                        if child.__class__ is dict:
                            children.append(Node(child, node, key, name, level, root))
            elif key in SCHEMA_LISTS or (key == "items" and value.__class__ is list):
                if value.__class__ is list:
                    for i, child in enumerate(value):
                        if child.__class__ is dict:
                            children.append(Node(child, node, key, i, level, root))
            elif value.__class__ is dict:
                children.append(Node(value, node, key, _NO_NAME, level, root))
        if children:
            children.reverse()
            stack += children
    return out
