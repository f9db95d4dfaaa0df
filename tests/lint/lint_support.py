"""Helpers shared by the lint tests: fixture paths, loading, snapshots."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcpkit.lint import PROFILES, Finding, lint_tools
from mcpkit.lint._load import parse_tool_list

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
ROOT = HERE.parent.parent
ALL_PROFILES = list(PROFILES)
UPDATE = os.environ.get("MCPKIT_UPDATE_SNAPSHOTS", "") not in ("", "0")


def lint_fixture(code: str, kind: str) -> list[Finding]:
    """Findings of rule `code` on `fixtures/<code>/<kind>.json`, linted for every profile."""
    listing = parse_tool_list((FIXTURES / code / f"{kind}.json").read_text(encoding="utf-8"))
    found = lint_tools(listing.tools, profiles=ALL_PROFILES, instructions=listing.instructions, groups="all")
    return [f for f in found if f.rule == code]


def check_snapshot(path: Path, value: Any) -> None:
    """Compare `value` with the JSON snapshot at `path` (rewrite it when MCPKIT_UPDATE_SNAPSHOTS=1)."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    if UPDATE or not path.exists():
        if not UPDATE:
            raise AssertionError(f"{path} missing; run with MCPKIT_UPDATE_SNAPSHOTS=1 to create it")
        path.write_text(text, encoding="utf-8")
        return
    assert path.read_text(encoding="utf-8") == text, f"{path} differs; MCPKIT_UPDATE_SNAPSHOTS=1 rewrites it"


def tool(name: str, schema: Any = None, **extra: Any) -> dict[str, Any]:
    """A described tool with `schema` (an empty object schema by default)."""
    out: dict[str, Any] = {"name": name, "description": f"The {name} tool."}
    out["inputSchema"] = {"type": "object", "properties": {}} if schema is None else schema
    out.update(extra)
    return out
