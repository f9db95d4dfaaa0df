"""Load YAML and keep, for every key and item, the line it came from (for errors that say where)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["Located", "Path", "load_located"]

Path = tuple[str | int, ...]


@dataclass
class Located:
    """Plain data (dicts, lists, scalars) plus `lines[path]`, the 1-based line of each node."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)

    def line(self, path: Path) -> int:
        """The line of `path`, or of its nearest ancestor that has one."""
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)


def load_located(text: str) -> Located:
    """Parse one YAML document with safe types, recording lines and duplicate keys.

    >>> doc = load_located("reports:\\n  - name: a\\n    sql: SELECT 1\\n")
    >>> doc.data["reports"][0]["sql"], doc.line(("reports", 0, "sql"))
    ('SELECT 1', 3)

    Raises:
        yaml.YAMLError: the text is not YAML (its `problem_mark` says where).
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        out = Located(None)
        if node is not None:
            out.data = _convert(loader, node, (), out)
        return out
    finally:
        loader.dispose()


def _convert(loader: yaml.SafeLoader, node: yaml.Node, path: Path, out: Located) -> Any:
    out.lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = str(key)
            if key in result:
                out.duplicates.append(((*path, key), key_node.start_mark.line + 1))
            result[key] = _convert(loader, value_node, (*path, key), out)
            out.lines[(*path, key)] = key_node.start_mark.line + 1
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(loader, item, (*path, i), out) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)
