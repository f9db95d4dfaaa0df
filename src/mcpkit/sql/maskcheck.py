"""Start-up mask checks: the masks file read against the database, and the database made to
withhold every masked column from every identity calls run as (the DSN's account and each
`--role-map` login), or the server refuses to start."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking import KnownSchema, MaskPolicy, Reflection, reflect
from mcpkit.sql.masking.copies import derived_and_copied, referenced_hints
from mcpkit.sql.masking.literals import require_matched
from mcpkit.sql.masking.view_order import order_findings as view_order_findings
from mcpkit.sql.masking.view_order import primary_keys
from mcpkit.sql.perrow import per_row_routines, per_row_since
from mcpkit.sql.profiles.base import Finding, merge_findings
from mcpkit.sql.profiles.catalog_reads import catalog_findings
from mcpkit.sql.profiles.stored import stored_queries
from mcpkit.sql.relcheck import relations_check
from mcpkit.sql.reverify import all_of
from mcpkit.sql.scanpins import enforce_scan_pins, pins_check

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.identities import IdentityRouter
    from mcpkit.sql.service import Masking

__all__ = [
    "derive_masks",
    "enforce_identity_masks",
    "enforce_identity_order",
    "enforce_masks",
    "enforce_order",
    "identity_mask_findings",
    "mask_findings",
    "mask_hints",
    "masks_check",
    "masks_readable",
    "masks_verify",
    "order_check",
    "order_findings",
    "ordered_schema",
    "per_row_routines",
    "prepare_masks",
    "reference_hints",
    "scan_order_hints",
    "trigger_hints",
]

log = logging.getLogger("mcpkit.sql")


def derive_masks(
    engine: SqlEngine, policy: MaskPolicy, masked: dict[str, frozenset[str]]
) -> tuple[MaskPolicy, dict[str, frozenset[str]]]:
    """The policy and the masked tables, with what the database derives from masked columns
    (generated columns, partitions and children, full-text indexes) masked as well."""
    if not masked:
        return policy, masked
    with engine.session(30.0, "startup-masks") as (conn, _):
        derived = derived_and_copied(engine.profile.derived_masks, conn, masked)
    merged = dict(masked)
    for d in derived:
        if d.columns:
            log.info("masks: %s %s also masked (%s)", d.key, ", ".join(sorted(d.columns)), d.why)
        else:
            log.info("masks: a read of %s counts as a masked read (%s)", d.key, d.why)
        merged[d.key] = merged.get(d.key, frozenset()) | d.columns
    readers = [(d.schema, d.table) for d in derived if not d.columns]  # a parent: its reads count (rt30 F1)
    return policy.with_columns((d.schema, d.table, d.columns) for d in derived).with_readers(readers), merged


def mask_findings(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> list[Finding]:
    """The masked columns the calls' identity can still read, with the SQL that withholds them."""
    if not masked:
        return []
    with engine.session(30.0, "startup-masks") as (conn, _):
        return engine.profile.use_masks(conn, masked)


def prepare_masks(engine: SqlEngine, mask: str) -> tuple[MaskPolicy, Reflection, dict[str, frozenset[str]]]:
    """The masks file read against the database: the policy with derived masks, the reflected
    schemas, and table -> masked columns (what `mask_findings` checks).

    Raises:
        SqlConfigError: the file is unusable, or a literal rule names a column that does not exist
            (`masking.literals`; one that may only be hidden from the account is logged).
    """
    policy = MaskPolicy.from_yaml(mask)
    for line in require_matched(engine, policy):
        log.warning("masks: %s", line)
    reflection = reflect(engine, policy)  # every schema, and the path queries resolve names through
    policy, masked = derive_masks(engine, policy, reflection.masked(policy))
    return policy, reflection, masked


def enforce_masks(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> None:
    """Have the database withhold the masked columns from the calls' identity, or refuse to start.

    Raises:
        SqlConfigError: the identity can read a masked column (one line each, with the SQL to fix).
    """
    findings = mask_findings(engine, masked)
    if findings:
        lines = "\n".join(f"  {f.line()}" for f in merge_findings(findings))
        raise SqlConfigError(
            "--mask: the database account can read masked columns; the database must withhold "
            f"them itself:\n{lines}"
        )


def masks_readable(
    engine: SqlEngine,
    conn: Connection,
    masked: Mapping[str, frozenset[str]],
    readers: frozenset[tuple[str | None, str]] | None = None,
) -> list[Finding]:
    """In one session (`conn`, as the identity to check): the masked columns, with what the
    database derives from them, that this identity can still read; with `readers` (the policy's,
    `MaskPolicy.readers`), also each table that now reads a masked table's rows but is not among
    them (an inheritance parent attached since start-up, rt30 F1): its reads would go unanalysed."""
    if not masked:
        return []
    merged = dict(masked)
    found = []
    counted = None if readers is None else MaskPolicy(readers=readers)
    for d in derived_and_copied(engine.profile.derived_masks, conn, masked):
        merged[d.key] = merged.get(d.key, frozenset()) | d.columns
        if counted is not None and not d.columns and not counted.reads_masked(d.schema, d.table):
            found.append(
                Finding(
                    "masked-scan-order-reader",
                    f"table {d.key} reads a masked table's rows ({d.why}) but does not count as a masked "
                    "read here (it became a parent since start-up, or the server's account cannot see it)",
                    "restart the server, as an account that can see it",
                )
            )
    return merge_findings(found + engine.profile.use_masks(conn, merged))


def masks_verify(masking: Masking, allow: Collection[str] = ()) -> Callable[[SqlEngine, Connection], None]:
    """`relcheck.relations_check` (the tables and columns are start-up's), `masks_check`, then
    `order_check`, `scanpins.pins_check`, of the masks resolved for the server's account."""
    return all_of(
        relations_check(masking),
        masks_check(masking.masked, masking.policy.readers),
        order_check(masking.policy, masking.schema, masking.masked, allow),
        pins_check(masking.schema, masking.masked, allow),
    )


def masks_check(
    masked: Mapping[str, frozenset[str]], readers: frozenset[tuple[str | None, str]] | None = None
) -> Callable[[SqlEngine, Connection], None]:
    """`masks_readable` as a check to run again inside a serving call's session (the shape of a
    re-verification's `Verify`): raises `SqlConfigError` with the fix lines when the engine's
    identity can read a masked column (or a table reads a masked table's rows outside `readers`).
    It reuses the masks resolved at start-up (no reflection, so no second connection from the
    identity's pool)."""
    frozen = dict(masked)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        findings = masks_readable(engine, conn, frozen, readers)
        if findings:
            lines = "; ".join(f.line() for f in findings)
            raise SqlConfigError(f"--mask: the identity calls run as can read masked columns: {lines}")

    return verify


def identity_mask_findings(
    router: IdentityRouter, masking: Masking, resolved: dict[str, dict[str, frozenset[str]]] | None = None
) -> list[tuple[str, Finding]]:
    """The masked columns each identity calls run as (every mapped role: its login, or the server's
    account after `SET ROLE`) can still read, with the SQL that withholds them.

    Each identity gets what the server's account gets at start-up: the masks file resolved against
    the tables it sees, the masks the database derives from them (generated columns, partitions,
    children, copies through foreign keys), and the database's column privileges checked. Call it
    again while serving to catch a grant made since. `resolved` gets each role's masked tables
    (what its `masks_check` checks while serving).
    """
    found: list[tuple[str, Finding]] = []
    for role, engine in router.identities():
        masked = dict(masking.masked)
        if role in router.roles.logins:  # a login of its own may see tables the account does not
            for table, columns in reflect(engine, masking.policy).masked(masking.policy).items():
                masked[table] = masked.get(table, frozenset()) | columns
        if resolved is not None:
            resolved[role] = masked
        with engine.session(30.0, "startup-masks") as (conn, _):
            found += [(role, f) for f in masks_readable(engine, conn, masked, masking.policy.readers)]
    return found


def enforce_identity_masks(router: IdentityRouter, masking: Masking) -> dict[str, dict[str, frozenset[str]]]:
    """Refuse to serve when an identity of the role map can read a masked column.

    Returns:
        Each role's masked tables (what its calls check again while serving).

    Raises:
        SqlConfigError: one line per role and column, with the SQL to fix.
    """
    resolved: dict[str, dict[str, frozenset[str]]] = {}
    found = identity_mask_findings(router, masking, resolved)
    if found:
        lines = "\n".join(f"  role {role}: {f.line()}" for role, f in found)
        raise SqlConfigError(
            "--mask with --role-map: a role's login can read masked columns; the database must "
            f"withhold them from every identity calls run as:\n{lines}"
        )
    return resolved


def order_findings(
    engine: SqlEngine,
    policy: MaskPolicy,
    known: KnownSchema,
    masked: dict[str, frozenset[str]],
    allow: Collection[str] = (),
) -> list[Finding]:
    """Views and allowed SQL functions the identity can use whose stored SQL answers in a scan order
    a masked column may set (`masking.view_order`; red team rt19mask F8); a function `allow` accepts
    with `function-order:` is no per-row call in them."""
    if not masked:
        return []
    with engine.session(30.0, "startup-masks") as (conn, _):
        return _order_in(engine, conn, policy, known, masked, allow)


def _order_in(engine: SqlEngine, conn: Connection, policy: MaskPolicy, known: KnownSchema,
              masked: Mapping[str, frozenset[str]], allow: Collection[str]) -> list[Finding]:  # fmt: skip
    catalog = catalog_findings(engine.profile, conn)  # a function reading the catalog (rt33b F3)
    stored = stored_queries(engine.profile, conn, masked, allow)
    if not stored:
        return catalog
    keys = primary_keys(conn, getattr(engine.profile, "primary_key", None))
    return catalog + view_order_findings(stored, engine.dialect, known, policy, keys)


def ordered_schema(
    engine: SqlEngine,
    reflection: Reflection,
    policy: MaskPolicy,
    masked: dict[str, frozenset[str]],
    allow: Collection[str],
) -> KnownSchema:
    """The `KnownSchema` calls are analysed against, with the user's functions that count as
    per-row ones (`per_row_routines`), once its views and functions passed `enforce_order`."""
    known = reflection.known(engine, withheld=engine.profile.withheld_relations())
    known.per_row = per_row_routines(engine, allow, known)  # `masking.shapes` refuses a call of one (rt29 F2)
    enforce_order(engine, policy, known, masked, allow)
    enforce_scan_pins(engine, known, masked, allow)  # reads never follow a masked column (rtB F1-F4)
    return known


def _refused_order(findings: list[Finding], allow: Collection[str]) -> None:
    refused = []
    for finding in findings:
        if finding.opt_in in allow:
            log.warning("masks: --allow %s: %s", finding.opt_in, finding.message)
        else:
            refused.append(finding)
    if refused:
        lines = "\n".join(f"  {f.line()}" for f in refused)
        what = "a view, function or policy hands on a masked scan order or reads the catalog"
        raise SqlConfigError(f"--mask: {what}:\n{lines}")


def enforce_order(
    engine: SqlEngine,
    policy: MaskPolicy,
    known: KnownSchema,
    masked: dict[str, frozenset[str]],
    allow: Collection[str],
) -> None:
    """Refuse to serve a view or function of `order_findings` unless its `--allow view-order:S.N` /
    `function-order:S.N` is given (then a warning).

    Raises:
        SqlConfigError: one line per view or function, with why and the statement that stops it.
    """
    _refused_order(order_findings(engine, policy, known, masked, allow), allow)


def order_check(
    policy: MaskPolicy, known: KnownSchema, masked: Mapping[str, frozenset[str]], allow: Collection[str]
) -> Callable[[SqlEngine, Connection], None]:
    """`enforce_order` inside a serving call's session (a re-verification's `Verify`): a view
    replaced while serving is analysed again (red team rt21 F2)."""
    frozen = dict(masked)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        if frozen:
            _refused_order(_order_in(engine, conn, policy, known, frozen, allow), allow)
            per_row_since(engine, conn, known, allow)

    return verify


def enforce_identity_order(
    router: IdentityRouter,
    masking: Masking,
    per_role: Mapping[str, dict[str, frozenset[str]]],
    allow: Collection[str],
) -> None:
    """`enforce_order` as each identity of the role map (a login may use views the account cannot).

    Raises:
        SqlConfigError: naming the role, as `enforce_order`.
    """
    for role, engine in router.identities():
        try:
            masked = per_role.get(role, masking.masked)
            masking.schema.per_row |= per_row_routines(engine, allow)  # its login's too (rt35b L1)
            enforce_order(engine, masking.policy, masking.schema, dict(masked), allow)
        except SqlConfigError as exc:
            raise SqlConfigError(f"role {role}: {exc}") from None


def scan_order_hints(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> list[str]:
    """Where the scan order may follow a masked column (warnings, never a reason not to start)."""
    return _hints(engine, masked, engine.profile.scan_order_hints, "scan-order")


def trigger_hints(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> list[str]:
    """Row triggers on a table with masked columns, which may copy a masked value elsewhere
    (warnings, never a reason not to start; `profiles.triggers`)."""
    return _hints(engine, masked, engine.profile.trigger_hints, "trigger")


def reference_hints(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> list[str]:
    """Masked columns that reference an unmasked column by a foreign key, whose values are then all
    among that column's (warnings, never a reason not to start; `masking.copies.referenced_hints`)."""
    return _hints(engine, masked, referenced_hints, "reference")


def mask_hints(engine: SqlEngine, masked: dict[str, frozenset[str]]) -> list[str]:
    """Every start-up warning about the masks: scan order, triggers and rules, referenced columns."""
    return scan_order_hints(engine, masked) + trigger_hints(engine, masked) + reference_hints(engine, masked)


def _hints(
    engine: SqlEngine,
    masked: dict[str, frozenset[str]],
    read: Callable[[Connection, Mapping[str, frozenset[str]]], list[str]],
    what: str,
) -> list[str]:
    if not masked:
        return []
    try:
        with engine.session(30.0, "startup-masks") as (conn, _):
            return read(conn, masked)
    except Exception as exc:
        log.info("masks: %s hints unavailable: %s", what, type(exc).__name__)
        return []
