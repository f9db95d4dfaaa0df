"""`mcpkit audit`: read, export and verify the SQL server's audit log (a SQLite file or a database table).

mcpkit audit [--since 1h] [--tool T] [--outcome CODE] [--tail N] [--format table|json] [--wide]
mcpkit audit --verify [--anchor SEQ:HASH ...]     exit 0 intact, 1 broken
mcpkit audit --head                               the anchor to keep somewhere else
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Any, Final

from sqlalchemy.exc import SQLAlchemyError

from mcpkit.sql.audit.chain import Anchor, parse_anchor, verify_chain
from mcpkit.sql.audit.record import OUTCOMES
from mcpkit.sql.audit.store import TABLE_NAME, AuditStore, default_audit_path, open_store
from mcpkit.sql.audit.view import render_table
from mcpkit.sql.errors import SqlConfigError

__all__ = ["parse_since", "register", "render_table", "run"]

EXIT_OK: Final = 0
EXIT_BROKEN: Final = 1
EXIT_USAGE: Final = 2
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RELATIVE: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


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
        "--format", choices=("table", "json"), default="table", help="json: one call a line (export)"
    )
    parser.add_argument("--wide", action="store_true", help="table: do not clip the sql column")
    check = parser.add_mutually_exclusive_group()
    check.add_argument(
        "--verify",
        action="store_true",
        help="recompute the hash chain over the whole log; exit 1 if anything was removed or changed",
    )
    check.add_argument(
        "--head", action="store_true", help="print SEQ:HASH of the newest entry (keep it elsewhere)"
    )
    parser.add_argument(
        "--anchor",
        action="append",
        default=[],
        metavar="SEQ:HASH",
        help="with --verify: a head printed earlier; the log must still hold it (catches cut tails)",
    )
    parser.set_defaults(func=run)
    return parser


def _store(args: argparse.Namespace) -> AuditStore:
    if not args.audit and not args.audit_dsn:
        args.audit = str(default_audit_path())
    if args.audit and not Path(args.audit).expanduser().is_file():
        raise SqlConfigError(f"no audit log at {args.audit}")
    return open_store(path=args.audit) if args.audit else open_store(dsn=args.audit_dsn)


def _verify(store: AuditStore, anchors: list[Anchor]) -> int:
    if not store.exists():
        print(f"BROKEN the audit table {TABLE_NAME} is missing (dropped, or never written)")
        return EXIT_BROKEN
    try:
        count, problems = verify_chain(store.chain(), anchors)
        problems += [
            f"entry {seq}: its indexed columns differ from its hashed content (changed)"
            for seq in store.mismatched_columns()
        ]
    except (ValueError, TypeError) as exc:  # a row no column type can read: tampered with by hand
        print(f"BROKEN a stored row is malformed: {type(exc).__name__}: {str(exc)[:200]}")
        return EXIT_BROKEN
    seq, digest = store.head()
    if problems:
        for line in problems[:50]:
            print(f"BROKEN {line}")
        if len(problems) > 50:
            print(f"BROKEN ... and {len(problems) - 50} more")
        return EXIT_BROKEN
    anchored = f", {len(anchors)} anchor(s) found" if anchors else ""
    print(f"ok: {count} entries, chain intact{anchored}; head {seq}:{digest}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Print, export or verify: 0; 1 when `--verify` finds the log broken; 2 on a usage or store problem."""
    try:
        if args.tail is not None and args.tail < 1:
            raise SqlConfigError("--tail must be at least 1")
        filtered = args.since or args.tool or args.outcome or args.tail
        if (args.verify or args.head) and filtered:
            raise SqlConfigError(
                "--verify and --head look at the whole log; drop --since/--tool/--outcome/--tail"
            )
        if args.anchor and not args.verify:
            raise SqlConfigError("--anchor goes with --verify")
        try:
            anchors = [parse_anchor(a) for a in args.anchor]
        except ValueError as exc:
            raise SqlConfigError(f"--anchor: {exc}") from None
        since = parse_since(args.since) if args.since else None
        store = _store(args)
        try:
            if not args.verify and not store.exists():
                raise SqlConfigError(f"no audit table {TABLE_NAME} in that store")
            if args.verify:
                return _verify(store, anchors)
            if args.head:
                seq, digest = store.head()
                print(f"{seq}:{digest}")
                return EXIT_OK
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
        # ASCII only: U+2028, U+0085 and the like are escaped, so every record is exactly one line
        for r in records:
            print(json.dumps(r.to_json(), ensure_ascii=True))
    else:
        print(render_table(records, wide=args.wide))
    return EXIT_OK
