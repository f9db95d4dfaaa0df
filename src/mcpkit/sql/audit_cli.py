"""`mcpkit audit`: read the SQL server's audit log (a SQLite file or a table in any database)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from sqlalchemy.exc import SQLAlchemyError

from mcpkit.sql.audit.record import OUTCOMES, AuditRecord
from mcpkit.sql.audit.store import default_audit_path, open_store
from mcpkit.sql.errors import SqlConfigError

__all__ = ["parse_since", "register", "render_table", "run"]

EXIT_OK: Final = 0
EXIT_USAGE: Final = 2
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RELATIVE: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_COLUMNS: Final = ("at", "call_id", "caller", "tool", "outcome", "rows", "ms", "reason", "sql")


def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """`--since`: an ISO 8601 time (UTC when it has no offset) or a span back from now (`90s`, `1h`, `2d`).

    >>> now = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC)
    >>> parse_since("1h", now).isoformat()
    '2026-01-02T11:00:00+00:00'
    >>> parse_since("2026-01-01T08:00:00+02:00").isoformat()
    '2026-01-01T06:00:00+00:00'

    Raises:
        SqlConfigError: neither form.
    """
    match = _RELATIVE.fullmatch(text.strip())
    if match:
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
        return (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=seconds)
    try:
        at = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise SqlConfigError(
            f"--since {text!r}: give an ISO 8601 time or a span such as 30m, 1h, 2d"
        ) from None
    return at.replace(tzinfo=dt.UTC) if at.tzinfo is None else at.astimezone(dt.UTC)


def _cells(r: AuditRecord) -> list[str]:
    caller = r.principal or r.identity or (f"{r.client_name}/{r.client_version}" if r.client_name else "")
    sql = " ".join((r.sql or "").split())
    return [
        r.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z",
        r.call_id[:12],
        caller[:32],
        r.tool,
        r.outcome,
        "" if r.rows is None else f"{r.rows}{'+' if r.truncated else ''}",
        "" if r.duration_ms is None else f"{r.duration_ms:.1f}",
        r.reason or "",
        sql if len(sql) <= 60 else sql[:57] + "...",
    ]


def render_table(records: Sequence[AuditRecord]) -> str:
    """Records as an aligned text table (rows `N+` when more rows existed)."""
    rows = [list(_COLUMNS), *(_cells(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `audit` sub-command; its `func` is `run`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="read the SQL server's audit log",
        description="Show the calls the SQL server recorded: who, which tool, what SQL, how it ended.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--audit",
        metavar="PATH",
        help=f"the audit SQLite file the server writes (default {default_audit_path()})",
    )
    where.add_argument("--audit-dsn", metavar="URL", help="the database holding the mcpkit_audit table")
    parser.add_argument(
        "--since", metavar="ISO|SPAN", help="only calls since then (2026-01-02T10:00, 1h, 2d)"
    )
    parser.add_argument("--tool", metavar="NAME", help="only calls of this tool")
    parser.add_argument(
        "--outcome",
        metavar="CODE",
        type=str.upper,
        choices=OUTCOMES,
        help=f"only this outcome ({', '.join(OUTCOMES)})",
    )
    parser.add_argument("--tail", type=int, metavar="N", help="only the last N calls")
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="json: one object a line"
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the matching records; 0, or 2 on a usage or connection problem."""
    try:
        if args.tail is not None and args.tail < 1:
            raise SqlConfigError("--tail must be at least 1")
        since = parse_since(args.since) if args.since else None
        if not args.audit and not args.audit_dsn:
            args.audit = str(default_audit_path())
        if args.audit and not Path(args.audit).expanduser().is_file():
            raise SqlConfigError(f"no audit log at {args.audit}")
        store = (
            open_store(path=args.audit, dsn=args.audit_dsn) if args.audit else open_store(dsn=args.audit_dsn)
        )
        try:
            records = store.read(since=since, tool=args.tool, outcome=args.outcome, tail=args.tail)
        finally:
            store.close()
    except SqlConfigError as exc:
        print(f"mcpkit audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SQLAlchemyError as exc:
        print(f"mcpkit audit: cannot read the audit log: {type(exc).__name__}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        for r in records:
            print(json.dumps(r.to_json(), ensure_ascii=False))
    else:
        print(render_table(records))
    return EXIT_OK
