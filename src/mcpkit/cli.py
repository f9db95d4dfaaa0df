"""The `mcpkit` command: a thin dispatcher to each part's own sub-commands.

Each part registers its own parser (`register(subparsers)`), imported only when named, so
`mcpkit lint` never pays for importing the SQL stack and the core never imports `sql/`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from mcpkit.errors import DefinitionError

# sub-command -> module whose `register(subparsers)` adds it
COMMANDS: dict[str, str] = {
    "lint": "mcpkit.lint.cli",
    "sql": "mcpkit.sql.cli",
    "audit": "mcpkit.sql.audit_cli",
    "egress": "mcpkit.egress.cli",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `mcpkit` command line; returns the exit code."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="mcpkit", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in args_in if not a.startswith("-")), None)
    for name, module in COMMANDS.items():
        if wanted is None or wanted == name:
            try:
                importlib.import_module(module).register(sub)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise
                sub.add_parser(name, help="(not available in this build)")
    args = parser.parse_args(args_in)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        code: int = func(args)
    except DefinitionError as exc:  # a bad option file or setting, found while building the server
        print(f"mcpkit {args.command}: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
