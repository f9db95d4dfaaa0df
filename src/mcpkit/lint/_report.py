"""Rendering findings: text for people, JSON for scripts, SARIF 2.1.0 for code scanning."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from typing import Any

from mcpkit.lint._engine import LintReport
from mcpkit.lint._finding import Finding
from mcpkit.lint._rule import REGISTRY

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _where(f: Finding) -> str:
    return f"{f.tool if f.tool is not None else '<server>'}{f.path}"


def clients_note(f: Finding) -> str:
    """Who the finding is for, worded by what the evidence supports: only errors "break" a client.

    >>> clients_note(Finding("SL013", "info", "t", "", "m", ("cursor",)))
    '(note for: cursor)'
    """
    names = ", ".join(f.clients)
    cls = REGISTRY.get(f.rule)
    if cls is not None and cls.group == "security":
        return "(security)"
    if f.severity == "error":
        return f"(breaks: {names})"
    if f.severity == "warning":
        return f"(may break: {names})"
    return f"(note for: {names})"


def render_text(report: LintReport, *, top: int = 20) -> str:
    """One line per finding, then a summary: counts, payload bytes, the largest tools."""
    lines = [f"{_where(f)}: {f.rule} [{f.severity}] {f.message} {clients_note(f)}" for f in report.findings]
    counts = Counter(f.severity for f in report.findings)
    if lines:
        lines.append("")
    lines.append(
        f"{len(report.tool_sizes)} tools, {report.payload_bytes:,} bytes; "
        f"{counts['error']} errors, {counts['warning']} warnings, {counts['info']} info"
    )
    sizes = sorted(report.tool_sizes, key=lambda item: item[1], reverse=True)
    if sizes and top > 0:
        width = max(len(name) for name, _ in sizes[:top])
        lines.append("largest tools:" if len(sizes) > top else "tool sizes:")
        lines.extend(f"  {name:<{width}}  {size:>10,} B" for name, size in sizes[:top])
        if len(sizes) > top:
            lines.append(f"  ... {len(sizes) - top} more")
    return "\n".join(lines) + "\n"


def render_json(report: LintReport) -> str:
    """`{"tools": N, "payload_bytes": B, "findings": [...]}`."""
    body = {
        "tools": len(report.tool_sizes),
        "payload_bytes": report.payload_bytes,
        "findings": [f.to_dict() for f in report.findings],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


def render_sarif(report: LintReport, *, artifact: str, version: str) -> str:
    """A SARIF 2.1.0 log with one run: every rule in the driver, one result per finding."""
    codes = sorted(REGISTRY)
    rules: list[dict[str, Any]] = []
    for code in codes:
        cls = REGISTRY[code]
        doc = inspect.cleandoc(cls.__doc__ or cls.summary)
        worst = max(cls.severity.values(), key=("info", "warning", "error").index)
        rules.append(
            {
                "id": code,
                "name": cls.name,
                "shortDescription": {"text": cls.summary},
                "help": {"text": doc, "markdown": doc},
                "defaultConfiguration": {"level": _SARIF_LEVEL[worst]},
                "properties": {"clients": sorted(cls.severity), "fixable": cls.fixable},
            }
        )
    results = [
        {
            "ruleId": f.rule,
            "ruleIndex": codes.index(f.rule),
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f"{f.message} {clients_note(f)}"},
            "locations": [
                {
                    "physicalLocation": {"artifactLocation": {"uri": artifact}},
                    "logicalLocations": [
                        {
                            "fullyQualifiedName": _where(f),
                            "kind": "member" if f.tool is not None else "module",
                        }
                    ],
                }
            ],
            "properties": {"tool": f.tool, "path": f.path, "clients": list(f.clients)},
        }
        for f in report.findings
    ]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "mcpkit-lint",
                        "version": version,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
