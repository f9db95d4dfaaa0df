"""Assemble `mcpkit sql serve` from its options: masking, identities, audit and reports around a service."""

from __future__ import annotations

import argparse
import logging
from contextlib import ExitStack
from importlib.resources import files
from pathlib import Path

from mcpkit.definition import Tool
from mcpkit.server import Server
from mcpkit.sql.audit import AuditLog, CallAudit, open_store
from mcpkit.sql.audit.store import SYNC_MODES, default_audit_path
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.identities import IdentityRouter, RoleMap, verify_roles
from mcpkit.sql.masking import KnownSchema, MaskPolicy, reflect_schema
from mcpkit.sql.reports import load_reports
from mcpkit.sql.server import build_server
from mcpkit.sql.service import Masking, SqlService
from mcpkit.telemetry import Telemetry
from mcpkit.transport.cli import telemetry_wanted

__all__ = ["DEMO_REPORTS", "add_serve_options", "assemble", "enforce_masks"]

log = logging.getLogger("mcpkit.sql")

DEMO_REPORTS = files("mcpkit.sql") / "demo_reports.yaml"
"""The report tools `--demo` serves (also `examples/reports.yaml`)."""


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    """The options of issue-6 features: reports, audit, masking, identities."""
    group = serve.add_argument_group("reports, audit, masking and identities")
    group.add_argument(
        "--reports", metavar="FILE", help="report tools from a reports.yaml (--demo: the demo's)"
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
    group.add_argument("--mask", metavar="FILE", help="masks.yaml: sensitive columns come back as <masked>")
    group.add_argument("--role-map", metavar="FILE", help="roles.yaml: one database role per principal")


def derive_masks(
    engine: SqlEngine, policy: MaskPolicy, masked: dict[str, frozenset[str]]
) -> tuple[MaskPolicy, dict[str, frozenset[str]]]:
    """The policy and the masked tables, with what the database derives from masked columns
    (generated columns, partitions and children, full-text indexes) masked as well."""
    if not masked:
        return policy, masked
    with engine.session(30.0, "startup-masks") as (conn, _):
        derived = engine.profile.derived_masks(conn, masked)
    merged = dict(masked)
    for d in derived:
        log.info("masks: %s %s also masked (%s)", d.key, ", ".join(sorted(d.columns)), d.why)
        merged[d.key] = merged.get(d.key, frozenset()) | d.columns
    return policy.with_columns((d.schema, d.table, d.columns) for d in derived), merged


def enforce_masks(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> None:
    """Have the database withhold the masked columns from the calls' identity, or refuse to start.

    Raises:
        SqlConfigError: the identity can read a masked column (one line each, with the SQL to fix).
    """
    if not masked:
        return
    with engine.session(30.0, "startup-masks") as (conn, _):
        findings = engine.profile.use_masks(conn, masked)
    if findings:
        lines = "\n".join(f"  {f.line()}" for f in findings)
        raise SqlConfigError(
            "--mask: the database account can read masked columns; the database must withhold "
            f"them itself:\n{lines}"
        )


def assemble(args: argparse.Namespace, service: SqlService, stack: ExitStack) -> Server:
    """The SQL server the options describe; what must be closed at the end goes on `stack`.

    Raises:
        SqlConfigError: a reports, masks or roles file is unusable, or a role check fails.
    """
    engine = service.engine
    if args.mask:
        if not isinstance(engine, SqlEngine):
            raise SqlConfigError("--mask needs a database engine it can reflect")
        policy = MaskPolicy.from_yaml(args.mask)
        # the account's default schema, as queries resolve it
        mapping = reflect_schema(engine.sa_engine, policy=policy)
        policy, masked = derive_masks(engine, policy, policy.masked_tables(mapping))
        enforce_masks(engine, masked)
        withheld = engine.profile.withheld_relations()
        service.masking = Masking(policy, KnownSchema(mapping, engine.dialect, withheld=withheld))
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
    router = None
    if args.role_map:
        if not isinstance(engine, SqlEngine):
            raise SqlConfigError("--role-map needs a database engine")
        if args.transport == "http" and not (args.tokens or args.jwt_issuer):
            raise SqlConfigError("--role-map over HTTP needs --tokens or --jwt-issuer: callers must be known")
        roles = RoleMap.from_yaml(args.role_map)
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
        router.verify(allow=allow)
        stack.callback(router.close)
    reports: list[Tool] = []
    source = args.reports or (str(DEMO_REPORTS) if args.demo else None)
    if source:
        masking = service.masking
        reports = load_reports(
            Path(source),
            service,
            schema=masking.schema if masking else None,
            policy=masking.policy if masking else None,
            calls=calls,
            engine_for=router.engine_for if router else None,
        )
    elif args.reports_only:
        raise SqlConfigError("--reports-only needs --reports FILE")
    allowed = [t.strip() for t in args.allowed_tools.split(",") if t.strip()] if args.allowed_tools else None
    return build_server(
        service,
        allowed_tools=allowed,
        redis_url=args.redis,
        router=router,
        calls=calls,
        reports=reports,
        reports_only=args.reports_only,
        with_list_tables=args.with_list_tables,
        middleware=[Telemetry()] if telemetry_wanted(args) else [],
    )
