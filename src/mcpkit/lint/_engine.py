"""`lint_tools`: build the views once, walk every schema once, run each rule on what it asked for.

Per-tool work is independent, so a large list can be split across forked worker processes
(`jobs`); list-wide rules (sizes, duplicates, counts) then run once in the caller.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import mcpkit.lint.rules  # noqa: F401  (fills REGISTRY)
from mcpkit.lint._defs import collapse_shared_defs
from mcpkit.lint._finding import Finding
from mcpkit.lint._profiles import PROTOCOLS, resolve_profiles
from mcpkit.lint._rule import REGISTRY, LintContext, Rule, ToolView, resolve_groups
from mcpkit.lint._types import json_size_flagged

_ENVELOPE = len('{"tools":[]}')
#: Below this many tools, forking workers costs more than it saves.
PARALLEL_MIN_TOOLS = 2000

Ranked = tuple[int, str, int, Finding]


@dataclass(frozen=True, slots=True)
class LintReport:
    """Findings plus the sizes the text report's summary shows."""

    findings: list[Finding]
    tool_sizes: list[tuple[str, int]]
    payload_bytes: int


def lint_tools(
    tools: list[dict[str, Any]],
    *,
    profiles: str | Sequence[str] | None = None,
    protocol: str = "2025-11-25",
    instructions: str | None = None,
    server_key: str | None = None,
    groups: str | Sequence[str] | None = None,
    server_name: str | None = None,
) -> list[Finding]:
    """Lint a `tools/list` result for the selected client profiles.

    >>> [f.rule for f in lint_tools([{"name": "t", "description": "d", "inputSchema": {}}])]
    ['SL001']

    Args:
        tools: the `tools` array of a `tools/list` result (plain JSON: dicts, lists, strings, numbers).
        profiles: names from `PROFILES` (a string is one name, `"all"`, `"default"` or a comma list);
            `None` means `DEFAULT_PROFILES`.
        protocol: the MCP revision to judge against, one of `PROTOCOLS`.
        instructions: the server's `instructions` from `initialize`, if any.
        server_key: the key the user gives the server in the client's config (`"github"` in
            `{"mcpServers": {"github": ...}}`), which clients prefix tool names with (SL008). Unknown by
            default: SL008 then assumes a `DEFAULT_KEY_LENGTH`-character key and only warns.
        groups: rule groups from `GROUPS` (`"security"` is opt-in); `None` means `("compat",)`.
        server_name: an older name of `server_key`.

    Returns:
        Findings ordered server-wide first, then by tool in list order, then by rule.

    Raises:
        ValueError: an unknown profile, group or protocol.
        TypeError: `tools` is not a list of objects.
    """
    return lint_report(
        tools,
        profiles=profiles,
        protocol=protocol,
        instructions=instructions,
        server_key=server_key if server_key is not None else server_name,
        groups=groups,
    ).findings


def lint_report(
    tools: list[dict[str, Any]],
    *,
    profiles: str | Sequence[str] | None = None,
    protocol: str = "2025-11-25",
    instructions: str | None = None,
    server_key: str | None = None,
    groups: str | Sequence[str] | None = None,
    jobs: int = 1,
) -> LintReport:
    """`lint_tools` plus per-tool and total payload sizes (what `mcpkit lint` prints).

    Args:
        jobs: worker processes for lists of `PARALLEL_MIN_TOOLS` or more (0: one per CPU). Workers are
            forked, so this is only used where `fork` exists and the caller runs no other thread.
    """
    selected = resolve_profiles(profiles)
    chosen = resolve_groups(groups)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
    if not isinstance(tools, list):
        raise TypeError(f"tools must be a list, not {type(tools).__name__}")
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise TypeError(f"tools[{index}] is not a JSON object")
    settings = (selected, protocol, instructions, server_key, chosen)
    workers = _workers(jobs, len(tools))
    if workers > 1:
        sizes, ranked = _parallel(tools, settings, workers)
    else:
        sizes, ranked = _lint_slice(tools, settings, 0, len(tools))
    views = [ToolView(i, tool, size) for i, (tool, size) in enumerate(zip(tools, sizes, strict=True))]
    payload = _ENVELOPE + sum(sizes) + max(len(views) - 1, 0)
    ctx = _context(views, settings, payload)
    for rule in _rules(ctx):
        if type(rule).check_list is not Rule.check_list:
            for f in rule.check_list():
                ranked.append((rule.indexes.get(id(f), -1), f.rule, -1, f))
    ranked.sort(key=lambda item: item[:3])
    findings = collapse_shared_defs([item[3] for item in ranked], tools)
    return LintReport(findings, [(v.label, v.size) for v in views], payload)


Settings = tuple[tuple[str, ...], str, str | None, str | None, tuple[str, ...]]


def _context(views: list[ToolView], settings: Settings, payload: int) -> LintContext:
    selected, protocol, instructions, server_key, chosen = settings
    return LintContext(
        views,
        profiles=selected,
        protocol=protocol,
        instructions=instructions,
        server_key=server_key,
        payload_bytes=payload,
        groups=chosen,
    )


def _rules(ctx: LintContext) -> list[Rule]:
    return [
        r for r in (cls(ctx) for _, cls in sorted(REGISTRY.items()) if cls.group in ctx.groups) if r.applies()
    ]


def _workers(jobs: int, count: int) -> int:
    if jobs == 1 or count < PARALLEL_MIN_TOOLS or threading.active_count() > 1:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    cpus = os.cpu_count() or 1
    return max(1, min(cpus if jobs <= 0 else jobs, cpus, count // (PARALLEL_MIN_TOOLS // 2)))


_Entry = tuple[list[Rule], dict[object, list[Rule]]]


def _dispatch_table(rules: list[Rule]) -> dict[str, _Entry]:
    """keyword -> (rules for any value, rules by string value or JSON type, each including the former)."""
    table: dict[str, _Entry] = {}
    for rule in rules:
        for keyword in rule.keywords:
            table.setdefault(keyword, ([], {}))[0].append(rule)
    for rule in rules:
        for keyword, values in rule.triggers.items():
            entry = table.setdefault(keyword, ([], {}))
            for value in values:
                entry[1].setdefault(value, [])
                if rule not in entry[1][value]:
                    entry[1][value].append(rule)
    for always, by_value in table.values():
        for trigger, extra in by_value.items():
            by_value[trigger] = always + [r for r in extra if r not in always]
    return table


def _lint_slice(
    tools: list[dict[str, Any]], settings: Settings, start: int, end: int
) -> tuple[list[int], list[Ranked]]:
    """Sizes of `tools[start:end]` and the per-tool findings, ranked for the final sort."""
    views = [ToolView(i, tools[i], *json_size_flagged(tools[i])) for i in range(start, end)]
    ctx = _context(views, settings, 0)
    rules = _rules(ctx)
    tool_rules = [r for r in rules if type(r).check_tool is not Rule.check_tool]
    dispatch = _dispatch_table(rules)
    get = dispatch.get
    ranked: list[Ranked] = []
    for tool in views:
        found: list[Finding] = []
        if dispatch:
            for node in tool.nodes:
                todo: list[Rule] | None = None
                for key, value in node.schema.items():
                    entry = get(key)
                    if entry is None:
                        continue
                    hit = entry[1].get(value if value.__class__ is str else value.__class__, entry[0])
                    if hit:
                        todo = hit if todo is None else todo + [r for r in hit if r not in todo]
                if todo:
                    for rule in todo:
                        found += rule.check_node(tool, node)
        for rule in tool_rules:  # after the nodes: a rule may sum up what its check_node saw
            found.extend(rule.check_tool(tool))
        index = tool.index
        ranked.extend((index, f.rule, i, f) for i, f in enumerate(found))
    return [v.size for v in views], ranked


# The list being linted, inherited by forked workers instead of being pickled to them.
_SHARED: tuple[list[dict[str, Any]], Settings] | None = None


def _worker_slice(start: int, end: int) -> tuple[list[int], list[Ranked]]:
    assert _SHARED is not None
    tools, settings = _SHARED
    return _lint_slice(tools, settings, start, end)


def _parallel(
    tools: list[dict[str, Any]], settings: Settings, workers: int
) -> tuple[list[int], list[Ranked]]:
    global _SHARED
    # The caller also runs the list-wide rules afterwards: give it a little less than its share.
    first = max(1, len(tools) * 9 // (10 * workers))
    bounds = [0, first, *(first + (len(tools) - first) * k // (workers - 1) for k in range(1, workers))]
    _SHARED = (tools, settings)
    try:
        with ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_worker_slice, bounds[k], bounds[k + 1]) for k in range(1, workers)]
            sizes, ranked = _lint_slice(tools, settings, bounds[0], bounds[1])
            for future in futures:
                more_sizes, more_ranked = future.result()
                sizes += more_sizes
                ranked += more_ranked
    finally:
        _SHARED = None
    return sizes, ranked
