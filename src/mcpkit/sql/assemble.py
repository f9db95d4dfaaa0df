"""Assemble `mcpkit sql serve` from its options: the databases (`--dsn [NAME=]URL`), each with its
masks, identities and reports, and the audit around them."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from importlib.resources import files
from pathlib import Path
from typing import Final

from mcpkit.definition import Tool
from mcpkit.server import Server
from mcpkit.sql.admission import FunctionPolicy, load_allowlist
from mcpkit.sql.audit import AuditLog, CallAudit, open_store
from mcpkit.sql.audit.store import SYNC_MODES, default_audit_path
from mcpkit.sql.checks import refuse_cost_oracle, refuse_cost_under_masks
from mcpkit.sql.engines.engine import DEFAULT_POOL_SIZE, SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.identities import IdentityRouter, RoleMap, verify_roles
from mcpkit.sql.maskcheck import (
    derive_masks,
    enforce_identity_masks,
    enforce_identity_order,
    enforce_masks,
    identity_mask_findings,
    mask_findings,
    mask_hints,
    masks_verify,
    ordered_schema,
    prepare_masks,
)
from mcpkit.sql.profiles.base import ConnectionBudget
from mcpkit.sql.relcheck import startup_relations
from mcpkit.sql.reports import load_reports
from mcpkit.sql.reverify import DEFAULT_REVERIFY_S, Guard, account_check
from mcpkit.sql.rolecheck import guard_roles
from mcpkit.sql.routing import Source, SourceRouter
from mcpkit.sql.server import build_server, namespace_for
from mcpkit.sql.service import Masking, SqlService
from mcpkit.sql.sources import configuration, login_of, logins_shared, per_source
from mcpkit.telemetry import Telemetry
from mcpkit.transport.cli import telemetry_wanted

__all__ = [
    "ALLOW_FUNCTIONS_ENV",
    "DEMO_REPORTS",
    "add_serve_options",
    "assemble",
    "derive_masks",
    "enforce_identity_masks",
    "enforce_masks",
    "equip",
    "function_policy",
    "identity_mask_findings",
    "mask_findings",
    "open_service",
    "open_sources",
    "prepare_masks",
]

log = logging.getLogger("mcpkit.sql")

DEMO_REPORTS = files("mcpkit.sql") / "demo_reports.yaml"
"""The report tools `--demo` serves (also `examples/reports.yaml`)."""
ALLOW_FUNCTIONS_ENV: Final = "MCPKIT_SQL_ALLOW_FUNCTIONS"


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    """The options of issue-6 features: reports, audit, masking, identities."""
    group = serve.add_argument_group(
        "reports, audit, masking and identities",
        "With several databases (--dsn NAME=URL), --reports, --mask and --role-map take "
        "NAME=FILE, once per database that has one.",
    )
    group.add_argument(
        "--reports",
        action="append",
        metavar="[SOURCE=]FILE",
        help="report tools from a reports.yaml (--demo: the demo's)",
    )
    group.add_argument("--reports-only", action="store_true", help="serve the reports, not execute_query")
    group.add_argument(
        "--with-list-tables", action="store_true", help="with --reports-only, keep list_tables"
    )
    audit = group.add_mutually_exclusive_group()
    audit.add_argument(
        "--audit", metavar="PATH", help=f"the audit SQLite file (default {default_audit_path()})"
    )
    audit.add_argument("--audit-dsn", metavar="URL", help="write the audit to this database instead")
    audit.add_argument("--no-audit", action="store_true", help="keep no audit log")
    group.add_argument(
        "--audit-sync",
        choices=SYNC_MODES,
        default="full",
        help="full: each entry on disk before the call goes on (default); normal: with the OS "
        "(survives a killed server, not a power cut)",
    )
    group.add_argument(
        "--mask",
        action="append",
        metavar="[SOURCE=]FILE",
        help="masks.yaml: sensitive columns come back as <masked>",
    )
    group.add_argument(
        "--role-map",
        action="append",
        metavar="[SOURCE=]FILE",
        help="roles.yaml: one database role per principal",
    )
    group.add_argument(
        "--similar",
        action="store_true",
        help="also serve similar_rows: nearest rows by an embedding column (SQLite with sqlite-vec, "
        "PostgreSQL with pgvector or float arrays, MySQL/MariaDB with JSON arrays)",
    )


def function_policy(args: argparse.Namespace, dialect: str) -> FunctionPolicy:
    """The function policy the options give (`--functions`, `--allow-function`, the environment)."""
    allow = load_allowlist(args.functions) if args.functions else None
    extra = list(args.allow_function)
    extra += [n.strip() for n in os.environ.get(ALLOW_FUNCTIONS_ENV, "").split(",") if n.strip()]
    policy = FunctionPolicy.for_dialect(dialect, allow=allow, extra=extra)
    if policy.extra:
        log.warning("functions allowed beyond the reviewed list: %s", ", ".join(sorted(policy.extra)))
    for name in sorted(policy.extra):
        left_out = policy.table.lookup(name)
        if left_out is not None and left_out.verdict == "absent":  # red team my17 F7
            log.warning("%s is allowed unbounded, although it was left out: %s", name, left_out.why)
    return policy


def open_service(
    url: str, args: argparse.Namespace, max_rows: int, sharing: int = 1, mapped: frozenset[str] = frozenset()
) -> SqlService:
    """Connect as the server would, refuse an account that holds too much, and build the service.

    Args:
        url: The database.
        args: The options.
        max_rows: The hard row maximum.
        sharing: How many sources log in with this URL's login: its connection limit must cover
            each one's pool (`ConnectionBudget`).
        mapped: Its `--role-map` roles, each checked as its own identity (`Profile.use_identities`).

    Raises:
        SqlConfigError: the account holds what a reader must not, or an option is unusable.
        QueryFailed, QueryTimeout: the database did not answer.
    """
    from mcpkit.sql.checks import (
        DEFAULT_BACKEND_MEMORY,
        ensure_bounded_memory,
        ensure_safe_account,
        inspect_account,
    )

    engine = SqlEngine(url, pool_size=getattr(args, "pool_size", DEFAULT_POOL_SIZE), isolate=args.isolate)
    try:
        functions = function_policy(args, engine.dialect)  # what the account's checks hold views to
        engine.profile.use_function_policy(functions)
        engine.profile.use_identities(mapped)
        budget = ConnectionBudget(engine.pool_size, sharing)
        report = inspect_account(engine, allowed=args.allow, connections=budget, fingerprinted=True)
        ensure_safe_account(report, allow_superuser=args.allow_superuser, allow=args.allow)
        ensure_bounded_memory(engine, getattr(args, "backend_memory", DEFAULT_BACKEND_MEMORY), args.allow)
        engine.guard = Guard(  # the same verification again while serving: catalog changed, periodically
            account_check(args.allow, args.allow_superuser),
            engine.url.render_as_string(hide_password=True),
            getattr(args, "reverify_interval", DEFAULT_REVERIFY_S),
            report.fingerprint,
            every_s=getattr(args, "catalog_check_interval", None),
        )
        if args.max_cost is not None:
            refuse_cost_oracle(engine, args.allow, "the database account")
        return SqlService(
            engine, max_rows=max_rows, timeout_s=args.timeout, functions=functions, max_cost=args.max_cost
        )
    except BaseException:
        engine.close()
        raise


def equip(
    args: argparse.Namespace, service: SqlService, mask: str | None, role_map: str | None
) -> IdentityRouter | None:
    """Masks and identities on one database's service: checked against the database, or refused.

    Raises:
        SqlConfigError: a masks or roles file is unusable, or a check fails.
    """
    engine = service.engine
    if mask:
        if not isinstance(engine, SqlEngine):
            raise SqlConfigError("--mask needs a database engine it can reflect")
        if args.max_cost is not None:
            refuse_cost_under_masks(args.allow)
        relations = startup_relations(engine)  # before the reflection: a change after it is seen
        policy, reflection, masked = prepare_masks(engine, mask)
        enforce_masks(engine, masked)
        for line in mask_hints(engine, masked):
            log.warning("masks: %s", line)
        known = ordered_schema(engine, reflection, policy, masked, getattr(args, "allow", ()))  # rt19mask F8
        if known.path:  # calls resolve names as the analysis did
            engine.profile.pin_name_path(known.path)
        service.masking = Masking(policy, known, masked, relations)
        if engine.guard is not None:  # the withholding is verified again while serving
            engine.guard.watch_masks(masks_verify(service.masking, getattr(args, "allow", ())))
    if getattr(args, "similar", False):
        from mcpkit.sql.similar import enable_similarity

        enable_similarity(service)
    if not role_map:
        return None
    if not isinstance(engine, SqlEngine):
        raise SqlConfigError("--role-map needs a database engine")
    roles = RoleMap.from_yaml(role_map)
    allow = [*args.allow, *(["superuser"] if args.allow_superuser else [])]
    shared = "shared-login" in allow
    if shared:
        log.warning(
            "--allow shared-login: one account switches roles; a query that reached "
            "set_config('role', ...) could take on another principal's role"
        )
        problems = verify_roles(engine, roles)
        if problems:
            raise SqlConfigError("role map: " + "; ".join(problems))
    # Over stdio there is no authenticated caller: the server runs as its configured account.
    router = IdentityRouter(
        service,
        roles,
        anonymous="account" if args.transport == "stdio" else "refuse",
        shared_login=shared,
    )
    try:
        router.verify(allow=allow)
        if args.max_cost is not None:
            for role, identity in router.identities():
                refuse_cost_oracle(identity, args.allow, f"role {role}")
        per_role = enforce_identity_masks(router, service.masking) if service.masking is not None else {}
        if service.masking is not None:
            enforce_identity_order(router, service.masking, per_role, args.allow)
        account = account_check(args.allow, args.allow_superuser)
        guard_roles(router, account, per_role, service.masking, args.allow)  # while serving
    except BaseException:
        router.close()
        raise
    return router


def _prepare(
    name: str,
    url: str,
    args: argparse.Namespace,
    mask: str | None,
    role_map: str | None,
    several: bool,
    sharing: int = 1,
) -> Callable[[], tuple[SqlService, IdentityRouter | None]]:
    def prepare() -> tuple[SqlService, IdentityRouter | None]:
        try:
            mapped = RoleMap.from_yaml(role_map).roles if role_map else frozenset()
            service = open_service(url, args, args.max_rows, sharing, mapped)
        except SqlConfigError as exc:
            raise _named(exc, name, several) from None
        try:
            return service, equip(args, service, mask, role_map)
        except SqlConfigError as exc:
            service.engine.close()
            raise _named(exc, name, several) from None
        except BaseException:
            service.engine.close()
            raise

    return prepare


def _named(exc: SqlConfigError, name: str, several: bool) -> SqlConfigError:
    return SqlConfigError(f"source {name}: {exc}") if several else exc


def open_sources(args: argparse.Namespace, dsns: Sequence[tuple[str, str]], stack: ExitStack) -> SourceRouter:
    """Every database of `--dsn`, each checked at start-up (and named in what fails).

    One database that does not answer stops the start, as it always did. With several, a database
    that does not answer is served as unavailable (its calls fail, naming it) and checked when it
    answers; one that answers and fails a check stops the start.

    Raises:
        SqlConfigError: a check failed (`source NAME: ...` with several databases).
    """
    names = [n for n, _ in dsns]
    masks = per_source(args.mask, names, "--mask")
    roles = per_source(args.role_map, names, "--role-map")
    several = len(dsns) > 1
    if roles and args.transport == "http" and not (args.tokens or args.jwt_issuer):
        raise SqlConfigError("--role-map over HTTP needs --tokens or --jwt-issuer: callers must be known")
    sources: list[Source] = []
    routing: SourceRouter | None = None
    try:
        shared = logins_shared([u for _, u in dsns])
        for name, url in dsns:
            sharing = shared[login_of(url)]
            prepare = _prepare(name, url, args, masks.get(name), roles.get(name), several, sharing)
            probe = SqlEngine(url, isolate=False)  # the dialect only: no connection, no zygote (rtI N2)
            dialect = probe.dialect
            probe.close()
            try:
                service, router = prepare()
            except (QueryFailed, QueryTimeout) as exc:
                if not several:
                    raise SqlConfigError(
                        "Cannot connect to the database; check the DSN and that the server is up."
                    ) from exc
                log.warning(
                    "source %s did not answer at start-up; its calls fail until it answers and "
                    "passes the start-up checks",
                    name,
                )
                sources.append(Source(name, dialect, prepare=prepare))
                continue
            sources.append(Source(name, dialect, service, router))
        if not any(s.ready for s in sources):
            raise SqlConfigError("Cannot connect to any of the databases; check the DSNs and the servers.")
        routing = SourceRouter(sources)
    finally:
        if routing is None:
            for s in sources:
                s.close()
    stack.callback(routing.close)
    return routing


def assemble(args: argparse.Namespace, routing: SourceRouter, stack: ExitStack) -> Server:
    """The SQL server the options describe; what must be closed at the end goes on `stack`.

    Raises:
        SqlConfigError: a reports file is unusable, or the audit store is unreachable.
    """
    calls = None
    if not args.no_audit:
        store = (
            open_store(dsn=args.audit_dsn, sync=args.audit_sync)
            if args.audit_dsn
            else open_store(path=args.audit or default_audit_path(), sync=args.audit_sync)
        )
        stack.callback(store.close)
        store.check()  # reachable and chained, or the server does not start
        audit = AuditLog(store)
        stack.callback(audit.close)
        audit.install_signal_handlers()
        calls = CallAudit(audit)
    names = list(routing.names)
    files_ = per_source(args.reports, names, "--reports")
    if args.demo and not files_:
        files_ = {names[0]: str(DEMO_REPORTS)}
    if args.reports_only and not files_:
        raise SqlConfigError("--reports-only needs --reports FILE")
    reports: list[Tool] = []
    for name, path in files_.items():
        source = routing.sources[name]
        if source.service is None:
            raise SqlConfigError(
                f"source {name}: --reports are checked against the database at start-up, and it "
                "did not answer"
            )
        masking = source.service.masking
        for tool in load_reports(
            Path(path),
            source.service,
            schema=masking.schema if masking else None,
            policy=masking.policy if masking else None,
            calls=calls,
        ):
            if tool.name in routing.fixed:
                raise SqlConfigError(
                    f"{path}: report {tool.name!r} is also a report of source {routing.fixed[tool.name]}"
                )
            routing.fixed[tool.name] = name
            reports.append(tool)
    allowed = [t.strip() for t in args.allowed_tools.split(",") if t.strip()] if args.allowed_tools else None
    given: str | None = getattr(args, "name", None)
    namespace = given or namespace_for(routing, reports, extra=configuration(args))
    log.info("cache and rate-limit namespace: %s", namespace)
    return build_server(
        routing,
        name=given or "mcpkit-sql",
        namespace=namespace,
        allowed_tools=allowed,
        redis_url=args.redis,
        calls=calls,
        reports=reports,
        reports_only=args.reports_only,
        with_list_tables=args.with_list_tables,
        middleware=[Telemetry()] if telemetry_wanted(args) else [],
        similar=getattr(args, "similar", False),
    )
