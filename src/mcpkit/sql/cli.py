"""`mcpkit sql serve|query|doctor|demo-db`: the command line of the SQL tool server."""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final

from mcpkit.errors import INTERNAL_MESSAGE, Refused, ToolError
from mcpkit.sql.assemble import (
    ALLOW_FUNCTIONS_ENV,
    add_serve_options,
    assemble,
    equip,
    function_policy,
    open_service,
    open_sources,
)
from mcpkit.sql.checks import DEFAULT_BACKEND_MEMORY, parse_memory
from mcpkit.sql.demo import load_demo, write_demo_sqlite
from mcpkit.sql.engines.engine import DEFAULT_POOL_SIZE, SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.profiles.base import ConnectionBudget
from mcpkit.sql.reverify import DEFAULT_CATALOG_CHECK_S, DEFAULT_REVERIFY_S
from mcpkit.sql.service import DEFAULT_ROWS, HARD_MAX_ROWS, SqlService
from mcpkit.sql.sources import load_sources, login_of, logins_shared, parse_dsns, per_source
from mcpkit.transport.cli import add_serving_arguments, serve

__all__ = ["EXIT_ANSWERED", "EXIT_DB_FAILED", "EXIT_REFUSED", "EXIT_USAGE", "register", "run"]

ALLOW_ENV: Final = "MCPKIT_SQL_ALLOW"
"""`--allow` names from the environment, comma-separated (each logged as a warning like the option)."""
EXIT_ANSWERED: Final = 0
EXIT_DOCTOR_FAIL: Final = 1
EXIT_USAGE: Final = 2
EXIT_REFUSED: Final = 3
EXIT_DB_FAILED: Final = 4

log = logging.getLogger("mcpkit.sql")


def _connection_options(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--dsn",
        action="append",
        metavar="[NAME=]URL",
        help="SQLAlchemy URL (postgresql://, mysql://, sqlite:///path); repeat as NAME=URL to serve "
        "several databases, each with its own account (tools then take source=NAME)",
    )
    where.add_argument(
        "--sources",
        metavar="FILE",
        help="sources.yaml: several databases, each with its URL (or the variable holding it) and "
        "its masks, role map and reports",
    )
    where.add_argument("--demo", action="store_true", help="use the bundled demo database (SQLite)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="per-call timeout (default 30 s)")
    p.add_argument(
        "--pool-size",
        type=int,
        default=DEFAULT_POOL_SIZE,
        metavar="N",
        help=f"database connections kept open per login (default {DEFAULT_POOL_SIZE}; 0: a new "
        "connection per call); each is reset before reuse",
    )
    p.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        help="SQLite: calls in worker processes killed at the deadline (default on; MCPKIT_SQLITE_ISOLATE=0)",
    )
    p.add_argument(
        "--reverify-interval",
        type=float,
        default=DEFAULT_REVERIFY_S,
        metavar="S",
        help=f"re-run the start-up verification at least this often while serving (default "
        f"{DEFAULT_REVERIFY_S:g} s); it also runs before the next call whenever the catalog changes",
    )
    p.add_argument(
        "--catalog-check-interval",
        type=float,
        default=None,
        metavar="S",
        help=f"read the catalog fingerprint before a call at most this often (default "
        f"{DEFAULT_CATALOG_CHECK_S:g} s, with --mask 0; 0: before every call, one more round trip each)",
    )
    p.add_argument(
        "--functions", metavar="FILE", help="replace the reviewed function allowlist with the names in FILE"
    )
    p.add_argument(
        "--allow-function",
        action="append",
        default=[],
        metavar="NAME",
        help="also allow this function (name, schema.name, db.package.name or prefix*; repeatable; also "
        f"${ALLOW_FUNCTIONS_ENV}, comma-separated); a schema.name also accepts its start-up finding "
        "(the same as --allow function:SCHEMA.NAME); the never list (sleeping, locks, files, SQL in "
        "strings, transaction ids, other sessions) cannot be allowed",
    )
    p.add_argument(
        "--max-cost",
        type=float,
        metavar="N",
        help="refuse queries the planner estimates above N (PostgreSQL, MySQL cost; MariaDB rows examined)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="NAME",
        help="accept one start-up finding: superuser, table-owner, create-schema, bypassrls, read-all-stats, "
        "read-all-settings, connection-limit, cost-under-rls, cost-under-masks, temp-space (MySQL), "
        "function:SCHEMA.NAME, extension:NAME, routine:DB.NAME, relation:SCHEMA.NAME, type:SCHEMA.NAME, "
        "foreign-table:SCHEMA.NAME, parameter:NAME, view-order:SCHEMA.NAME, "
        "function-order:SCHEMA.NAME, policy-order:SCHEMA.TABLE.POLICY, clustered-order:TABLE, "
        "partition-order:TABLE (--mask), function-config:SCHEMA.NAME, foreign-server:NAME (PostgreSQL: "
        "a function that sets a setting for itself, USAGE on a server); a function opt-in by name counts "
        "while the name has one function, one with overloads by signature, function:SCHEMA.NAME(integer), "
        "unbounded-memory (PostgreSQL) (repeatable, also "
        f"${ALLOW_ENV}, comma-separated; each is logged as a warning); function:SCHEMA.NAME also "
        "lets queries call it (the same as --allow-function SCHEMA.NAME)",
    )
    p.add_argument("--allow-superuser", action="store_true", help="the same as --allow superuser")
    p.add_argument(
        "--backend-memory",
        type=_memory,
        default=DEFAULT_BACKEND_MEMORY,
        metavar="SIZE",
        help="PostgreSQL: start only if a backend cannot allocate SIZE (64M..1G, default 1G), which a "
        "data limit on the server (systemd LimitDATA=, ulimit -d) enforces; --allow unbounded-memory "
        "serves without it",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log admitted SQL and details to stderr")


def _memory(value: str) -> int:
    try:
        return parse_memory(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `sql` sub-command (serve, query, doctor, demo-db); its `func` is `run`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sql",
        help="a safe, read-only SQL tool server",
        description="Let an agent look at a database without being able to hurt it.",
    )
    sub = parser.add_subparsers(dest="sql_command", metavar="COMMAND", required=True)

    serve = sub.add_parser("serve", help="serve list_tables, describe_table, execute_query over MCP")
    _connection_options(serve)
    add_serving_arguments(serve)
    add_serve_options(serve)
    serve.add_argument("--max-rows", type=int, default=500, metavar="N", help="hard row maximum (<= 5000)")
    serve.add_argument("--allowed-tools", metavar="A,B", help="list and allow only these tools")
    serve.add_argument(
        "--name",
        metavar="NAME",
        help="the server's name, which also namespaces its Redis keys (cache, rate limits): give "
        "replicas of one server the same name and different servers different ones (default: "
        "mcpkit-sql, with a namespace derived from the databases without passwords and the "
        "masks, role-map and reports files, so only identically configured servers share keys)",
    )

    query = sub.add_parser(
        "query",
        help="run one query exactly as execute_query would and print what the agent would see",
        epilog="Exit status: 0 answered, 3 refused, 4 failed in the database, 2 usage or configuration.",
    )
    _connection_options(query)
    query.add_argument(
        "--max-rows", type=int, default=DEFAULT_ROWS, metavar="N", help="rows to show (default 25)"
    )
    query.add_argument("--source", metavar="NAME", help="with several databases: the one to query")
    query.add_argument(
        "--mask",
        action="append",
        metavar="[SOURCE=]FILE",
        help="masks.yaml: answer as serve --mask would, after its start-up checks (a sources file's "
        "mask: applies too)",
    )
    query.add_argument("sql", metavar="SQL")

    doctor = sub.add_parser("doctor", help="check the account, the read-only session and the timeout")
    _connection_options(doctor)
    doctor.add_argument(
        "--mask",
        action="append",
        metavar="[SOURCE=]FILE",
        help="masks.yaml: also run serve --mask's start-up checks (the database withholds each "
        "masked column)",
    )
    doctor.add_argument(
        "--role-map",
        action="append",
        metavar="[SOURCE=]FILE",
        help="roles.yaml: also run serve --role-map's start-up checks as every mapped role (with "
        "--mask, each role's masked columns); the logins' secrets come from the environment",
    )

    grant = sub.add_parser(
        "grant",
        help="print the SQL that creates a least-privilege reader role for some tables",
        description="Connect as an administrator and print, without running it, the SQL that creates "
        "a reader role for TABLES that `serve` accepts at start-up (PostgreSQL, MySQL/MariaDB).",
    )
    grant.add_argument("--dsn", required=True, metavar="URL", help="an administrator's SQLAlchemy URL")
    grant.add_argument("--role", required=True, help="the new role (PostgreSQL) or user (MySQL) name")
    grant.add_argument("--tables", required=True, metavar="A,B", help="schema.table names to grant")
    grant.add_argument("--password-env", metavar="VAR", help="take the password from this variable")
    grant.add_argument("--mask", metavar="FILE", help="masks.yaml: grant SELECT on the unmasked columns only")
    grant.add_argument(
        "--pool-size",
        type=int,
        default=DEFAULT_POOL_SIZE,
        metavar="N",
        help="the --pool-size serve will use: MySQL/MariaDB's MAX_USER_CONNECTIONS is set for it "
        f"(default {DEFAULT_POOL_SIZE})",
    )

    demo = sub.add_parser("demo-db", help="write the demo database to PATH, or load it into --dsn")
    target = demo.add_mutually_exclusive_group(required=True)
    target.add_argument("path", nargs="?", metavar="PATH", help="SQLite file to create")
    target.add_argument("--dsn", metavar="URL", help="PostgreSQL or MySQL database to load the tables into")
    demo.add_argument("--schema", help="schema (PostgreSQL) or database (MySQL) for --dsn")
    demo.add_argument("--force", action="store_true", help="overwrite PATH")
    parser.set_defaults(func=run)
    return parser


def _demo_dsn() -> str:
    folder = Path(tempfile.mkdtemp(prefix="mcpkit-sql-demo-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = write_demo_sqlite(folder / "demo.db")
    path.chmod(0o444)  # read-only on disk too
    return f"sqlite:///{path}"


def _dsns(args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.demo:
        return [("default", _demo_dsn())]
    if not args.sources:
        return parse_dsns(args.dsn)
    entries = load_sources(args.sources)
    for option, attribute in (("mask", "mask"), ("role_map", "role_map"), ("reports", "reports")):
        given = [f"{e.name}={getattr(e, attribute)}" for e in entries if getattr(e, attribute)]
        if given and hasattr(args, option):  # the per-source files, as if given as NAME=FILE
            setattr(args, option, [*(getattr(args, option) or []), *given])
    return [(e.name, e.url) for e in entries]


def opt_ins(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> tuple[list[str], list[str]]:
    """`--allow` (and `$MCPKIT_SQL_ALLOW`) and `--allow-function`, made one decision: reopening a
    function accepts both its start-up finding and its use in queries, whichever option named it.

    >>> ns = argparse.Namespace(allow=["function:app.f", "table-owner"], allow_function=["app.g", "h"])
    >>> opt_ins(ns, env={"MCPKIT_SQL_ALLOW": "unbounded-memory, table-owner"})
    (['function:app.f', 'table-owner', 'unbounded-memory', 'function:app.g'], ['app.g', 'h', 'app.f'])
    """
    given = [*args.allow, *(n.strip() for n in env.get(ALLOW_ENV, "").split(","))]
    allow = [a for a in dict.fromkeys(given) if a]
    functions = list(args.allow_function)
    allow += [f"function:{n}" for n in functions if "." in n and f"function:{n}" not in allow]
    # the signature form `function:S.F(integer)` lets queries call S.F: admission tells no overloads apart
    functions += [a.split(":", 1)[1].split("(")[0] for a in allow if a.startswith("function:") and a in given]
    return allow, list(dict.fromkeys(functions))


def _service(args: argparse.Namespace, max_rows: int) -> SqlService:
    args.allow, args.allow_function = opt_ins(args)
    dsns = _dsns(args)
    wanted = getattr(args, "source", None)
    chosen = [(n, u) for n, u in dsns if n == wanted] if wanted else dsns
    if len(chosen) != 1:
        names = ", ".join(n for n, _ in dsns)
        raise SqlConfigError(f"name the database to query with --source ({names})")
    name, url = chosen[0]
    mask = per_source(getattr(args, "mask", None), [n for n, _ in dsns], "--mask").get(name)
    try:
        service = open_service(url, args, max_rows)
    except (QueryFailed, QueryTimeout) as exc:
        raise SqlConfigError(
            "Cannot connect to the database; check the DSN and that the server is up."
        ) from exc
    try:  # the masks, as serve applies them (a role map does not apply: the CLI is the account)
        equip(args, service, mask, None)
    except BaseException:
        service.engine.close()
        raise
    return service


def _serve(args: argparse.Namespace) -> int:

    if not 1 <= args.max_rows <= HARD_MAX_ROWS:
        raise SqlConfigError(f"--max-rows must be between 1 and {HARD_MAX_ROWS}.")
    args.allow, args.allow_function = opt_ins(args)
    logging.getLogger("mcpkit.calls").setLevel(logging.INFO)  # the operator's record of every call
    with ExitStack() as stack:
        serve(assemble(args, open_sources(args, _dsns(args), stack), stack), args)
    return EXIT_ANSWERED


def _query(args: argparse.Namespace) -> int:
    if not 1 <= args.max_rows <= HARD_MAX_ROWS:
        raise SqlConfigError(f"--max-rows must be between 1 and {HARD_MAX_ROWS}.")
    service = _service(args, HARD_MAX_ROWS)
    try:
        _, text = service.query(args.sql, call_id="cli", max_rows=args.max_rows)
    except ToolError as exc:  # exactly what the model would read
        print(f"{exc.code}: {exc.message}")
        return EXIT_REFUSED if isinstance(exc, Refused) else EXIT_DB_FAILED
    except Exception:  # as the server answers it: one line, the traceback in the log (-v)
        log.info("sql call cli failed unexpectedly", exc_info=True)
        print(f"INTERNAL: {INTERNAL_MESSAGE}")
        return EXIT_DB_FAILED
    finally:
        service.engine.close()
    print(text)
    return EXIT_ANSWERED


def _doctor(args: argparse.Namespace) -> int:
    from mcpkit.sql.doctor import diagnose

    args.allow, args.allow_function = opt_ins(args)  # function:S.F lets queries call it, as serve reads it
    allow = [*args.allow, *(["superuser"] if args.allow_superuser else [])]
    dsns = _dsns(args)
    masks = per_source(args.mask, [n for n, _ in dsns], "--mask")
    roles = per_source(args.role_map, [n for n, _ in dsns], "--role-map")
    shared = logins_shared([u for _, u in dsns])
    failed = False
    for name, url in dsns:
        engine = SqlEngine(url, pool_size=args.pool_size, isolate=getattr(args, "isolate", None))
        engine.profile.use_function_policy(function_policy(args, engine.dialect))  # as serve checks views
        budget = ConnectionBudget(engine.pool_size, shared[login_of(url)])
        try:
            checks = diagnose(
                engine,
                timeout_s=min(args.timeout, 2.0),
                allow=allow,
                connections=budget,
                mask=masks.get(name),
                role_map=roles.get(name),
                memory=args.backend_memory,
            )
        finally:
            engine.close()
        if len(dsns) > 1:
            print(f"source {name} ({engine.profile.name})")
        for check in checks:
            print(("  " if len(dsns) > 1 else "") + check.line())
        failed = failed or any(c.status == "fail" for c in checks)
    return EXIT_DOCTOR_FAIL if failed else EXIT_ANSWERED


def _demo_db(args: argparse.Namespace) -> int:
    if args.dsn:
        load_demo(args.dsn, schema=args.schema)
        print(f"loaded sales_demo and product_vectors into {args.schema or 'the default schema'}")
        return EXIT_ANSWERED
    try:
        path = write_demo_sqlite(args.path, overwrite=args.force)
    except FileExistsError:
        raise SqlConfigError(f"{args.path} exists; pass --force to overwrite it.") from None
    print(f"wrote {path}")
    return EXIT_ANSWERED


def run(args: argparse.Namespace) -> int:
    """Run a parsed `mcpkit sql ...` command; returns the exit status."""
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if verbose else logging.WARNING)
    if not verbose:
        logging.getLogger("sqlglot").setLevel(logging.ERROR)
        if args.sql_command == "doctor":  # the probes fail on purpose; the report says how
            logging.getLogger("mcpkit.sql").setLevel(logging.ERROR)
    from mcpkit.sql.grant_cli import grant

    commands = {"serve": _serve, "query": _query, "doctor": _doctor, "grant": grant, "demo-db": _demo_db}
    try:
        return commands[args.sql_command](args)
    except SqlConfigError as exc:
        print(f"mcpkit sql: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"mcpkit sql: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
