"""`mcpkit lint`: the command line over `lint_report`, `fix_tools` and the live-server fetchers."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from mcpkit.lint._engine import lint_report
from mcpkit.lint._fix import apply_fixes
from mcpkit.lint._load import InputError, ToolList, parse_tool_list
from mcpkit.lint._profiles import DEFAULT_PROFILES, PROFILES, PROTOCOLS, resolve_profiles
from mcpkit.lint._report import render_json, render_sarif, render_text
from mcpkit.lint._rule import resolve_groups

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `lint` sub-command to an argparse subparsers object (its `func` is `run`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "lint",
        help="check a server's tools against what MCP clients accept",
        description="Lint an MCP server's tools/list for the clients that will read it.",
        epilog=f"profiles: {', '.join(PROFILES)} (default: {','.join(DEFAULT_PROFILES)}). "
        "Exit status: 0 no error, 1 errors found, 2 usage or input error.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help='JSON file ({"tools": [...]}, a list, or a tools/list response); - reads standard input',
    )
    source.add_argument(
        "--stdio", metavar="COMMAND", help='start a stdio server, e.g. --stdio "python server.py"'
    )
    source.add_argument("--url", metavar="URL", help="a Streamable HTTP server endpoint")
    source.add_argument(
        "--config",
        metavar="FILE",
        help="a client's MCP config (claude_desktop_config.json, .mcp.json, .cursor/mcp.json, "
        ".vscode/mcp.json): start every server, lint each with its key, then across servers",
    )
    parser.add_argument(
        "--client",
        choices=("claude-desktop", "claude-code", "cursor", "vscode"),
        help="whose config --config reads (default: from the file's name and shape)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra HTTP header for --url (repeatable)",
    )
    parser.add_argument(
        "--profile", default=None, metavar="LIST", help="comma-separated client profiles, or 'all'"
    )
    parser.add_argument("--protocol", default="2025-11-25", choices=PROTOCOLS)
    parser.add_argument("--format", default="text", choices=("text", "json", "sarif"))
    parser.add_argument("--fix", metavar="OUT", help="write the tools with meaning-preserving fixes to OUT")
    parser.add_argument(
        "--server-key",
        "--server-name",
        dest="server_key",
        metavar="KEY",
        help="the key you give this server in your client's config; clients prefix tool names with it "
        "(SL008; default: a 10-character key is assumed)",
    )
    parser.add_argument(
        "--group",
        default=None,
        metavar="LIST",
        help="rule groups: compat (default), security (tool poisoning, opt-in), or all",
    )
    parser.add_argument(
        "--security", action="store_true", help="also run the security group (same as --group all)"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for --stdio/--url (default 30)")
    parser.add_argument(
        "--sizes",
        type=int,
        default=20,
        metavar="N",
        help="rows of the text summary's size table, largest first (0: every tool)",
    )
    parser.add_argument("--jobs", type=int, default=0, help="worker processes for very large lists (0: auto)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run `mcpkit lint` with parsed arguments; returns the exit code."""
    if args.config is not None:
        return _run_config(args)
    try:
        profiles = _profiles(args.profile)
        _groups(args)
        listing = _load(args)
    except (InputError, ValueError) as exc:
        print(f"mcpkit lint: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in listing.notes:
        print(f"mcpkit lint: note: {note}", file=sys.stderr)
    tools = listing.tools
    if args.fix:
        tools, changes = apply_fixes(tools, protocol=args.protocol)
        try:
            Path(args.fix).write_text(json.dumps({"tools": tools}, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            print(f"mcpkit lint: cannot write {args.fix}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
        for change in changes:
            print(f"fixed: {change}", file=sys.stderr)
        print(
            f"mcpkit lint: {len(changes)} fix(es) written to {args.fix}; findings below are what is left",
            file=sys.stderr,
        )
    report = lint_report(
        tools,
        profiles=profiles,
        protocol=args.protocol,
        instructions=listing.instructions,
        server_key=args.server_key,
        groups=_groups(args),
        jobs=args.jobs,
    )
    if args.format == "json":
        sys.stdout.write(render_json(report))
    elif args.format == "sarif":
        sys.stdout.write(render_sarif(report, artifact=_artifact(args), version=_version()))
    else:
        sys.stdout.write(render_text(report, top=args.sizes if args.sizes > 0 else len(report.tool_sizes)))
    return EXIT_ERRORS if any(f.severity == "error" for f in report.findings) else EXIT_OK


def _run_config(args: argparse.Namespace) -> int:
    from mcpkit.lint._config import lint_config, render_config_json, render_config_text

    if args.fix or args.format == "sarif":
        print("mcpkit lint: --config prints text or json (no --fix, no sarif)", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = lint_config(
            args.config,
            client=args.client,
            profiles=_profiles(args.profile),
            groups=_groups(args),
            protocol=args.protocol,
            timeout=args.timeout,
        )
    except (InputError, ValueError) as exc:
        print(f"mcpkit lint: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(render_config_json(report) if args.format == "json" else render_config_text(report))
    failed = [r.entry.key for r in report.servers if r.report is None]
    if failed:
        print(f"mcpkit lint: could not start or reach: {', '.join(failed)}", file=sys.stderr)
    errors = any(f.severity == "error" for r in report.servers if r.report for f in r.report.findings)
    errors = errors or any(f.severity == "error" for f in report.across)
    return EXIT_ERRORS if errors or failed else EXIT_OK


def _profiles(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else resolve_profiles(value)


def _groups(args: argparse.Namespace) -> tuple[str, ...] | None:
    if args.security:
        return resolve_groups("all" if args.group is None else f"{args.group},security")
    return None if args.group is None else resolve_groups(args.group)


def _load(args: argparse.Namespace) -> ToolList:
    if args.header and not args.url:
        raise ValueError("--header only applies to --url")
    if args.stdio is not None or args.url is not None:
        from mcpkit.lint._remote import ServerError, fetch_http, fetch_stdio

        try:
            if args.stdio is not None:
                return fetch_stdio(args.stdio, timeout=args.timeout)
            return fetch_http(args.url, headers=args.header, timeout=args.timeout)
        except ServerError as exc:
            raise InputError(str(exc)) from None
    if args.file == "-":
        return parse_tool_list(sys.stdin.read(), "<stdin>")
    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read {args.file}: not UTF-8 text") from None
    return parse_tool_list(text, args.file)


def _artifact(args: argparse.Namespace) -> str:
    if args.url:
        return str(args.url)
    if args.stdio:
        return "mcp-server"
    return "stdin" if args.file == "-" else Path(args.file).as_posix()


def _version() -> str:
    try:
        return metadata.version("mcpkit")
    except metadata.PackageNotFoundError:
        return "0"
