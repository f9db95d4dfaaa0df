"""Findings inside `$defs` that many tools share: reported once, for the first tool, with a count.

Generated servers embed the same `$defs` block (often mostly unused) in every tool, so one bad
definition would otherwise be reported once per tool (hundreds of identical lines).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mcpkit.lint._finding import Finding

_DEFS = ("$defs", "definitions")


def _tokens(path: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def _def_entry(path: str) -> tuple[str, str, str] | None:
    """(root, defs keyword, definition name) when `path` lies inside a root-level `$defs` entry."""
    parts = _tokens(path)
    if len(parts) >= 3 and parts[0] in ("inputSchema", "outputSchema") and parts[1] in _DEFS:
        return parts[0], parts[1], parts[2]
    return None


def collapse_shared_defs(findings: list[Finding], tools: list[dict[str, Any]]) -> list[Finding]:
    """Keep the first of identical findings inside identical `$defs` entries of different tools.

    >>> bad = {"type": "object", "$defs": {"X": {"type": "array"}}}
    >>> tools = [{"name": n, "inputSchema": bad} for n in ("a", "b")]
    >>> f = [Finding("SL004", "error", n, "/inputSchema/$defs/X", "no items", ("vscode",)) for n in "ab"]
    >>> [(x.tool, x.message) for x in collapse_shared_defs(f, tools)]
    [('a', 'no items (the same `$defs` entry X is in 1 more tool: b; reported once)')]
    """
    if not any("/$defs/" in f.path or "/definitions/" in f.path for f in findings):
        return findings
    by_label: dict[str, dict[str, Any]] = {}
    for index, tool in enumerate(tools):
        name = tool.get("name")
        by_label.setdefault(name if isinstance(name, str) else f"tools[{index}]", tool)
    content: dict[tuple[str, str, str, str], str] = {}
    first: dict[tuple[Any, ...], int] = {}
    also: dict[int, list[str]] = {}
    keep: list[Finding | None] = []
    f: Finding | None
    for f in findings:
        entry = _def_entry(f.path) if f.tool is not None else None
        if entry is None or f.tool is None:
            keep.append(f)
            continue
        ckey = (f.tool, *entry)
        if ckey not in content:
            root, defs, name = entry
            schema = by_label.get(f.tool, {}).get(root)
            value = schema.get(defs, {}).get(name) if isinstance(schema, dict) else None
            content[ckey] = json.dumps(value, sort_keys=True, default=str)
        key = (f.rule, f.severity, f.clients, f.message, f.path, content[ckey])
        if key in first:
            also[first[key]].append(f.tool)
            keep.append(None)
        else:
            first[key] = len(keep)
            also[len(keep)] = []
            keep.append(f)
    out: list[Finding] = []
    for index, kept in enumerate(keep):
        if kept is None:
            continue
        f = kept
        others = also.get(index)
        if others:
            entry = _def_entry(f.path)
            assert entry is not None
            shown = ", ".join(others[:3]) + (f" (+{len(others) - 3} more)" if len(others) > 3 else "")
            plural = "s" if len(others) > 1 else ""
            f = dataclasses.replace(
                f,
                message=f"{f.message} (the same `{entry[1]}` entry {entry[2]} is in {len(others)} more "
                f"tool{plural}: {shown}; reported once)",
            )
        out.append(f)
    return out
