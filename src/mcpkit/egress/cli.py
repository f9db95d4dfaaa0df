"""`mcpkit egress check URL [--allow HOST]... [--resolve HOST=IP[,IP...]]...`

Prints the guard's verdict and reason for one URL, as an operator would want to see it (the
resolved addresses included). Exit status: 0 allowed, 3 denied, 2 usage error.
`--resolve` replaces DNS for that host, as curl's option does, so rebinding and mixed answers
can be tried without a network; other hosts use the system resolver.
"""

from __future__ import annotations

import argparse
import sys
from ipaddress import ip_address
from typing import Any

import anyio

from mcpkit.egress.addresses import IPAddress
from mcpkit.egress.check import Verdict, check_url
from mcpkit.egress.errors import EgressDenied
from mcpkit.egress.policy import EgressPolicy
from mcpkit.egress.resolver import StaticResolver, SystemResolver
from mcpkit.egress.urls import canonical_host
from mcpkit.errors import DefinitionError

__all__ = ["EXIT_ALLOWED", "EXIT_DENIED", "EXIT_USAGE", "register", "run"]

EXIT_ALLOWED, EXIT_USAGE, EXIT_DENIED = 0, 2, 3


def register(subparsers: Any) -> None:
    """Add `egress check` to the `mcpkit` command line."""
    egress = subparsers.add_parser(
        "egress", help="inspect the egress guard", description=__doc__.splitlines()[0]
    )
    actions = egress.add_subparsers(dest="egress_command", metavar="ACTION")
    check = actions.add_parser("check", help="say whether the guard would fetch URL, and why")
    check.add_argument("url", metavar="URL")
    check.add_argument(
        "--allow", action="append", default=None, metavar="HOST", help="allowlist entry (repeat)"
    )
    check.add_argument(
        "--resolve", action="append", default=[], metavar="HOST=IP[,IP...]", help="fixed DNS answer (repeat)"
    )
    check.add_argument(
        "--port", action="append", type=int, default=None, help="allowed port (default 80, 443)"
    )
    egress.set_defaults(func=run)


def _parse_resolve(items: list[str]) -> dict[str, list[IPAddress]]:
    answers: dict[str, list[IPAddress]] = {}
    for item in items:
        host, sep, ips = item.partition("=")
        if not sep or not host or not ips:
            raise ValueError(f"--resolve expects HOST=IP[,IP...], got {item!r}")
        key, _ = canonical_host(host)
        answers.setdefault(key, []).extend(ip_address(ip.strip()) for ip in ips.split(","))
    return answers


def _print(verdict: Verdict) -> None:
    word = "ALLOWED" if verdict.allowed else "DENIED"
    print(f"{word} ({verdict.reason}): {verdict.message}")
    if verdict.url:
        print(f"  url: {verdict.url}")
    if verdict.detail and verdict.detail != verdict.message:
        print(f"  detail: {verdict.detail}")


def run(args: argparse.Namespace) -> int:
    """Run `mcpkit egress check`; returns 0 allowed, 3 denied, 2 on a usage error."""
    if getattr(args, "egress_command", None) != "check":
        print(
            "usage: mcpkit egress check URL [--allow HOST]... [--resolve HOST=IP[,IP...]]...", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        answers = _parse_resolve(args.resolve)
        kwargs: dict[str, Any] = {"allow": None if args.allow is None else tuple(args.allow)}
        if args.port:
            kwargs["ports"] = frozenset(args.port)
        policy = EgressPolicy(**kwargs)
    except (ValueError, DefinitionError, EgressDenied) as exc:
        message = exc.message if isinstance(exc, EgressDenied) else str(exc)
        print(f"mcpkit egress check: {message}", file=sys.stderr)
        return EXIT_USAGE
    resolver = StaticResolver(answers, fallback=SystemResolver())
    verdict = anyio.run(check_url, args.url, policy, resolver)
    _print(verdict)
    return EXIT_ALLOWED if verdict.allowed else EXIT_DENIED
