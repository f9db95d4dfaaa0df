"""`mcpkit lint --config FILE`: lint a client's whole MCP configuration, the way the client loads it.

Reads Claude Desktop (`claude_desktop_config.json`), Claude Code (`.mcp.json`), Cursor
(`.cursor/mcp.json`) and VS Code (`.vscode/mcp.json`: `servers`, `inputs`) files; starts every stdio
server and reaches every URL server; lints each with its real config key (the prefix clients put on
its tool names); then checks what only the whole setup shows: the same tool name on two servers
(SL027) and the client's tool budget counted over all servers (SL014).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpkit.lint._engine import LintReport, lint_report
from mcpkit.lint._finding import Finding, Severity
from mcpkit.lint._load import InputError
from mcpkit.lint._profiles import resolve_profiles
from mcpkit.lint.rules.sl014_too_many_tools import BUDGETS
from mcpkit.lint.rules.sl027_cross_server_collision import COLLISION_LEVELS

#: Which client a config file belongs to, by its name (`--client` overrides).
CLIENT_FILES = {
    "claude_desktop_config.json": "claude-desktop",
    ".mcp.json": "claude-code",
    "mcp.json": "cursor",  # .cursor/mcp.json; .vscode/mcp.json is recognised by its folder
}
#: The lint profile that judges each client's servers.
CLIENT_PROFILE = {
    "claude-desktop": "claude-code",
    "claude-code": "claude-code",
    "cursor": "cursor",
    "vscode": "vscode",
}
_VAR = re.compile(r"\$\{([^}]+)\}")


@dataclass
class ServerEntry:
    """One configured server."""

    key: str
    transport: str  # "stdio" or "http"
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class ServerResult:
    """What linting one configured server gave: a report, or why it could not be reached."""

    entry: ServerEntry
    report: LintReport | None = None
    error: str | None = None


@dataclass
class ConfigReport:
    """Every server's result plus the findings across servers."""

    client: str
    path: str
    servers: list[ServerResult]
    across: list[Finding]


def detect_client(path: Path, data: dict[str, Any]) -> str:
    """The client a config file is for, from its name, folder and shape."""
    if path.parent.name == ".vscode" or ("servers" in data and "mcpServers" not in data):
        return "vscode"
    if path.parent.name == ".cursor":
        return "cursor"
    return CLIENT_FILES.get(path.name, "claude-code")


def load_config(path: str | Path, client: str | None = None) -> tuple[str, list[ServerEntry]]:
    """Parse a config file into (client, server entries), expanding `${...}` variables.

    Raises:
        InputError: unreadable, not JSON, or no servers in it.
    """
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    kind = client or detect_client(file, data)
    if kind not in CLIENT_PROFILE:
        raise InputError(f"unknown client {kind!r}; choose from {', '.join(CLIENT_PROFILE)}")
    servers = data.get("servers" if kind == "vscode" else "mcpServers")
    if servers is None:
        servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, dict) or not servers:
        raise InputError(f'{path}: no servers (expected a "mcpServers" or "servers" object)')
    inputs = {i.get("id"): i for i in data.get("inputs", []) if isinstance(i, dict)}
    root = file.resolve().parent
    workspace = root.parent if root.name in (".vscode", ".cursor") else root
    entries = [_entry(key, spec, inputs, workspace) for key, spec in servers.items()]
    return kind, entries


def _expand(value: str, inputs: dict[Any, dict[str, Any]], workspace: Path, notes: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in ("workspaceFolder", "workspaceRoot"):
            return str(workspace)
        if name == "userHome":
            return str(Path.home())
        if name.startswith("input:"):
            ident = name[6:]
            given = os.environ.get(f"MCPKIT_INPUT_{ident}")
            if given is not None:
                return given
            default = inputs.get(ident, {}).get("default")
            if isinstance(default, str):
                return default
            notes.append(f"input {ident!r} is prompted by the client; set MCPKIT_INPUT_{ident} to supply it")
            return ""
        var, _, default = name.removeprefix("env:").partition(":-")
        return os.environ.get(var, default)

    return _VAR.sub(one, value)


def _entry(key: str, spec: Any, inputs: dict[Any, dict[str, Any]], workspace: Path) -> ServerEntry:
    notes: list[str] = []
    if not isinstance(spec, dict):
        return ServerEntry(key, "invalid", notes=[f"the entry is {type(spec).__name__}, not an object"])

    def ex(v: Any) -> str:
        return _expand(str(v), inputs, workspace, notes)

    env = {str(k): ex(v) for k, v in (spec.get("env") or {}).items()}
    if "command" in spec:
        argv = [ex(spec["command"]), *(ex(a) for a in spec.get("args") or [])]
        cwd = ex(spec["cwd"]) if spec.get("cwd") else None
        return ServerEntry(key, "stdio", command=argv, env=env, cwd=cwd, notes=notes)
    url = spec.get("url") or spec.get("serverUrl")
    if isinstance(url, str):
        headers = {str(k): ex(v) for k, v in (spec.get("headers") or {}).items()}
        return ServerEntry(key, "http", url=ex(url), headers=headers, env=env, notes=notes)
    return ServerEntry(key, "invalid", notes=[*notes, "neither a command nor a url"])


def lint_config(
    path: str | Path,
    *,
    client: str | None = None,
    profiles: str | Sequence[str] | None = None,
    groups: str | Sequence[str] | None = None,
    protocol: str = "2025-11-25",
    timeout: float = 30.0,
) -> ConfigReport:
    """Start or reach every configured server, lint each with its config key, then across servers.

    `profiles` defaults to the client's own profile plus `spec`. A server that cannot be started or
    reached is reported with the reason; the others are still linted.
    """
    from mcpkit.lint._remote import ServerError, fetch_http, fetch_stdio

    kind, entries = load_config(path, client)
    selected = resolve_profiles(profiles if profiles is not None else [CLIENT_PROFILE[kind], "spec"])
    results: list[ServerResult] = []
    for entry in entries:
        result = ServerResult(entry)
        try:
            if entry.transport == "stdio":
                listing = fetch_stdio(entry.command, env=entry.env, cwd=entry.cwd, timeout=timeout)
            elif entry.transport == "http":
                headers = [f"{k}: {v}" for k, v in entry.headers.items()]
                listing = fetch_http(entry.url, headers=headers, timeout=timeout)
            else:
                raise ServerError("; ".join(entry.notes) or "not a server entry")
            result.report = lint_report(
                listing.tools,
                profiles=selected,
                protocol=protocol,
                instructions=listing.instructions,
                server_key=entry.key,
                groups=groups,
            )
        except (ServerError, InputError, OSError) as exc:
            result.error = str(exc)
        results.append(result)
    return ConfigReport(kind, str(path), results, _across(results, selected))


def _across(results: list[ServerResult], selected: tuple[str, ...]) -> list[Finding]:
    out: list[Finding] = []
    owners: dict[str, list[str]] = {}
    total = 0
    for r in results:
        if r.report is None:
            continue
        total += len(r.report.tool_sizes)
        for name, _ in r.report.tool_sizes:
            keys = owners.setdefault(name, [])
            if r.entry.key not in keys:
                keys.append(r.entry.key)
    levels = {p: s for p, s in COLLISION_LEVELS.items() if p in selected}
    for name, keys in owners.items():
        if len(keys) > 1 and levels:
            out.append(
                _finding(
                    "SL027",
                    levels,
                    name,
                    f"tool {name!r} is served by {len(keys)} servers ({', '.join(keys)}): clients that do "
                    "not prefix names keep one of them, and the model cannot tell them apart by name",
                )
            )
    for client, (budget, level, effect) in BUDGETS.items():
        if client in selected and total > budget:
            servers = sum(r.report is not None for r in results)
            out.append(
                _finding(
                    "SL014",
                    {client: level},
                    None,
                    f"{total} tools across {servers} servers, over {budget} ({effect})",
                )
            )
    return out


def _finding(rule: str, levels: dict[str, Severity], tool: str | None, message: str) -> Finding:
    worst: Severity = (
        "error" if "error" in levels.values() else "warning" if "warning" in levels.values() else "info"
    )
    return Finding(rule, worst, tool, "", message, tuple(levels))


def render_config_text(report: ConfigReport) -> str:
    """A section per server (or why it failed), then the findings across servers."""
    from mcpkit.lint._report import clients_note

    lines = [f"{report.path}: {report.client} configuration, {len(report.servers)} server(s)"]
    for r in report.servers:
        e = r.entry
        what = " ".join(e.command) if e.transport == "stdio" else e.url
        if r.report is None:
            lines.append(f"\n== {e.key} ({e.transport}: {what}): FAILED, not linted")
            lines.extend(f"   {line}" for line in (r.error or "unknown error").splitlines())
            continue
        counts = {s: sum(f.severity == s for f in r.report.findings) for s in ("error", "warning", "info")}
        lines.append(
            f"\n== {e.key} ({e.transport}: {what}): {len(r.report.tool_sizes)} tools, "
            f"{r.report.payload_bytes:,} bytes; {counts['error']} errors, {counts['warning']} warnings, "
            f"{counts['info']} info"
        )
        lines.extend(f"   note: {n}" for n in e.notes)
        for f in r.report.findings:
            where = f"{f.tool if f.tool is not None else '<server>'}{f.path}"
            lines.append(f"{e.key}:{where}: {f.rule} [{f.severity}] {f.message} {clients_note(f)}")
    lines.append("\n== across servers")
    lines.extend(
        f"{f.tool or '<config>'}: {f.rule} [{f.severity}] {f.message} {clients_note(f)}"
        for f in report.across
    )
    if not report.across:
        lines.append("no name collisions; the total tool count fits every selected client's budget")
    return "\n".join(lines) + "\n"


def render_config_json(report: ConfigReport) -> str:
    """`{"client", "servers": [{"key", "transport", "error" | "tools", "findings"}], "across"}`."""
    servers = []
    for r in report.servers:
        item: dict[str, Any] = {"key": r.entry.key, "transport": r.entry.transport, "notes": r.entry.notes}
        if r.report is None:
            item["error"] = r.error
        else:
            item["tools"] = len(r.report.tool_sizes)
            item["payload_bytes"] = r.report.payload_bytes
            item["findings"] = [f.to_dict() for f in r.report.findings]
        servers.append(item)
    body = {
        "config": report.path,
        "client": report.client,
        "servers": servers,
        "across": [f.to_dict() for f in report.across],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
