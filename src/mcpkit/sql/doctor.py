"""`mcpkit sql doctor`: connect as the server would and report what holds, one line per check."""

from __future__ import annotations

import time
from collections.abc import Collection
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mcpkit.sql.checks import (
    DEFAULT_BACKEND_MEMORY,
    backend_memory,
    inspect_account,
    probe_read_only,
    probe_timeout,
)
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.profiles.base import ConnectionBudget, merge_findings
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService

if TYPE_CHECKING:
    from mcpkit.sql.masking import MaskPolicy, Reflection

__all__ = ["Check", "diagnose"]

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    status: Status
    name: str
    detail: str

    def line(self) -> str:
        """`ok   name: detail`."""
        return f"{self.status:<5}{self.name}: {self.detail}"


def _lint(engine: SqlEngine) -> Check:
    from mcpkit.lint import lint_tools

    server = build_server(SqlService(engine, catalog=None), lint="off")
    findings = [
        f for f in lint_tools(server.list_tools(), instructions=server.instructions) if f.severity != "info"
    ]
    if not findings:
        return Check("ok", "tools lint", "clean")
    worst: Status = "fail" if any(f.severity == "error" for f in findings) else "warn"
    shown = "; ".join(f"{f.rule} {f.tool or 'server'}: {f.message}" for f in findings[:3])
    return Check(worst, "tools lint", shown)


def _masks(engine: SqlEngine, mask: str, allow: Collection[str] = ()) -> list[Check]:
    """What `serve --mask` checks at start-up: every masked column withheld by the database."""
    from mcpkit.sql.maskcheck import (
        mask_findings,
        order_findings,
        prepare_masks,
        reference_hints,
        scan_order_hints,
        trigger_hints,
    )
    from mcpkit.sql.masking import MaskPolicy
    from mcpkit.sql.masking.literals import unmatched_rules
    from mcpkit.sql.scanpins import partition_findings

    errors, warnings = unmatched_rules(engine, MaskPolicy.from_yaml(mask))
    rules = [Check("warn", "masks", line) for line in warnings]
    if errors:
        return [*(Check("fail", "masks", line) for line in errors), *rules]
    policy, reflection, masked = prepare_masks(engine, mask)
    rules += [Check("warn", "masks", line) for line in _unseen(policy, reflection)]
    if not masked:
        return [Check("warn", "masks", f"{mask} masks no column of the tables the account can see"), *rules]
    findings = merge_findings(mask_findings(engine, masked))
    hints = [Check("warn", "scan order", line) for line in scan_order_hints(engine, masked)]
    hints += [Check("warn", "triggers", line) for line in trigger_hints(engine, masked)]
    hints += [Check("warn", "references", line) for line in reference_hints(engine, masked)]
    ordered = order_findings(engine, policy, reflection.known(engine), masked, allow)  # rt19mask F8
    hints += [Check("warn" if f.opt_in in allow else "fail", "masks", f.line()) for f in ordered]
    hints += [Check("warn", "masks", line) for line in _per_row(engine, allow)]  # rt29, rt32
    parted = partition_findings(engine, masked)  # a partition key over a masked column (partref)
    hints += [Check("warn" if f.opt_in in allow else "fail", "masks", f.line()) for f in parted]
    if not findings:
        count, tables = sum(len(c) for c in masked.values()), sum(1 for c in masked.values() if c)
        detail = f"the database withholds all {count} masked column(s) of {tables} table(s)"
        if not engine.profile.has_accounts:
            detail = f"the authorizer withholds all {count} masked column(s) of {tables} table(s)"
        return [Check("ok", "masks", detail), *rules, *hints]
    return [*(Check("fail", "masks", f.line()) for f in findings), *rules, *hints]


def _per_row(engine: SqlEngine, allow: Collection[str]) -> list[str]:
    """One line per user function calls may use that counts as per-row over masked reads."""
    policy = engine.profile.function_policy
    with engine.session(30.0, "doctor") as (conn, _):
        found = engine.profile.row_order_routines(conn)
    return [
        f"function {s}.{n} counts as a per-row function over masked reads: {why}"
        for (s, n), why in sorted(found.items())
        if f"function-order:{s}.{n}" not in allow
        and policy is not None
        and policy.reaches(n, s)  # a MariaDB package's functions too (rt34 F2)
    ]


def _split(key: str) -> tuple[str | None, str]:
    schema, _, table = key.rpartition(".")
    return schema or None, table


def _unseen(policy: MaskPolicy, reflection: Reflection) -> list[str]:
    """MySQL/MariaDB tables with columns the account cannot see that a glob rule may cover: the
    count of masked columns leaves those out (rt19mask F4)."""
    unsure = [
        key
        for key in sorted(reflection.partial)
        if any(not r.literal and r.covers_table(*_split(key)) for r in policy.rules)
    ]
    if not unsure:
        return []
    return [
        f"this account cannot see some columns of {', '.join(unsure)}, which a glob rule may mean: the"
        " count of masked columns leaves them out (the database withholds them; NATURAL JOIN and USING"
        " on a name it cannot read are refused over these tables)"
    ]


def _identities(engine: SqlEngine, role_map: str, mask: str | None, allow: Collection[str]) -> list[Check]:
    """What `serve --role-map` checks at start-up as each mapped role (least privilege, no reach to
    another principal or the server's account) and, with `mask`, each role's masked columns."""
    from mcpkit.sql.assemble import identity_mask_findings, prepare_masks
    from mcpkit.sql.identities import IdentityRouter, RoleMap
    from mcpkit.sql.service import Masking

    try:
        roles = RoleMap.from_yaml(role_map)
        service = SqlService(engine, catalog=None, functions=engine.profile.function_policy)  # as serve's
        router = IdentityRouter(service, roles, shared_login="shared-login" in allow)
        router.verify(allow=allow)
    except SqlConfigError as exc:
        return [Check("fail", "identities", str(exc).replace("\n", " "))]
    checks = [Check("ok", "identities", f"{len(roles.roles)} mapped role(s) pass the start-up checks")]
    if mask:
        try:
            policy, reflection, masked = prepare_masks(engine, mask)
        except SqlConfigError:  # a literal rule matching nothing: `_masks` printed it already
            return checks
        found = identity_mask_findings(router, Masking(policy, reflection.known(engine), masked))
        checks += [Check("fail", "masks", f"role {role}: {f.line()}") for role, f in found]
        if not found:
            detail = (
                f"every mapped role is withheld all {sum(len(c) for c in masked.values())} masked column(s)"
            )
            checks.append(Check("ok", "masks per role", detail))
    return checks


def diagnose(
    engine: SqlEngine,
    *,
    timeout_s: float = 1.0,
    allow: Collection[str] = (),
    connections: ConnectionBudget | None = None,
    mask: str | None = None,
    role_map: str | None = None,
    memory: int = DEFAULT_BACKEND_MEMORY,
) -> list[Check]:
    """Run every check; stop after `reachable` when the database cannot be reached.

    Args:
        engine: The engine, as the server would build it.
        timeout_s: Timeout the statement-timeout probe uses.
        allow: The `--allow` opt-ins: their findings are warnings, the others failures.
        connections: What `serve` would open as this login (its connection limit is checked).
        mask: A masks.yaml: run `serve --mask`'s start-up checks too.
        role_map: A roles.yaml: run `serve --role-map`'s start-up checks as every mapped role (with
            `mask`, each role's masked columns too).
        memory: `--backend-memory`: a backend must fail to allocate it (PostgreSQL).

    Returns:
        The checks, in order.
    """
    started = time.monotonic()
    try:
        engine.execute("SELECT 1", None, 1, 10.0, "doctor")
    except (QueryFailed, QueryTimeout) as exc:
        return [Check("fail", "reachable", f"could not run SELECT 1 ({(exc.data or {}).get('reason')})")]
    checks = [
        Check("ok", "reachable", f"connected and answered in {(time.monotonic() - started) * 1000:.0f} ms")
    ]
    if role_map:  # each mapped role is checked as its own identity (`_identities`), not again here
        from mcpkit.sql.identities import RoleMap

        with suppress(SqlConfigError):  # an unusable file is `_identities`' failure
            engine.profile.use_identities(RoleMap.from_yaml(role_map).roles)
    report = inspect_account(engine, call_id="doctor", allowed=allow, connections=connections)
    checks.append(Check("ok", "dialect", f"{engine.dialect} ({report.version.split(' on ')[0]})"))
    accepted = set(allow)
    for finding in merge_findings(report.findings):
        status: Status = "warn" if finding.opt_in in accepted else "fail"
        checks.append(Check(status, "least privilege", finding.line()))
    checks += [Check("warn", w.code.split(":")[-1].replace("-", " "), w.line()) for w in report.warnings]
    if not report.findings:
        holds = (
            f"{report.user} holds nothing a reader must not (roles, ownership, CREATE, functions)"
            if engine.profile.has_accounts
            else f"{engine.profile.name} has no accounts; the file is opened read-only"
        )
        checks.append(Check("ok", "least privilege", holds))
    if report.writable:
        shown = ", ".join(report.writable[:5]) + (" ..." if len(report.writable) > 5 else "")
        checks.append(Check("warn", "writable tables", f"{len(report.writable)}: {shown}"))
    else:
        checks.append(Check("ok", "writable tables", "none"))
    if mask:
        checks += _masks(engine, mask, allow)
    if role_map:
        checks += _identities(engine, role_map, mask, allow)
    ro = probe_read_only(engine)
    checks.append(Check("ok" if ro.ok else "fail", "read-only session", ro.detail))
    to = probe_timeout(engine, timeout_s)
    checks.append(Check("ok" if to.ok else "fail", "statement timeout", to.detail))
    try:
        bounded = backend_memory(engine, memory, allow)
    except (QueryFailed, QueryTimeout) as exc:
        bounded = (
            "fail",
            f"the memory probe failed ({exc.kind if isinstance(exc, QueryFailed) else 'timeout'})",
        )
    if bounded is not None:
        checks.append(Check(bounded[0], "backend memory", bounded[1]))
    checks.append(_lint(engine))
    return checks
