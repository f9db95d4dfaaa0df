"""Start-up: reflect how each masked table may be read (`Profile.scan_pins`), so the order the
database reads it in never follows a masked column (`masking.scan_pins`), and refuse to serve a
table whose physical order follows one (a clustered key, CLUSTER) unless `--allow clustered-order:T`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

from sqlalchemy.engine import Connection
from sqlglot import exp

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking import KnownSchema
from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.scan_order import IndexReach, ScanPin, split_key

__all__ = [
    "enforce_scan_pins",
    "index_scans_allowed",
    "partition_findings",
    "pin_findings_check",
    "pin_state",
    "pins_check",
]

log = logging.getLogger("mcpkit.sql")


def enforce_scan_pins(
    engine: SqlEngine,
    known: KnownSchema,
    masked: Mapping[str, frozenset[str]],
    allow: Collection[str],
    conn: Connection | None = None,
) -> dict[str, ScanPin]:
    """Set `known.scan_pins` from the profile (none where it has no `scan_pins`), read in `conn` or a
    session of its own.

    Raises:
        SqlConfigError: one line per table stored in a masked column's order, not allowed.
    """
    reflect = getattr(engine.profile, "scan_pins", None)
    if reflect is None or not masked:
        return {}
    if conn is None:
        with engine.session(30.0, "startup-masks") as (session, _):
            pins, findings, reach = _reflect(engine, session, masked, known.default_schema)
    else:
        pins, findings, reach = _reflect(engine, conn, masked, known.default_schema)
    _refuse(findings, allow)
    known.scan_pins, known.index_reach = pins, reach
    return pins


def _reflect(
    engine: SqlEngine, conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None
) -> tuple[dict[str, ScanPin], list[Finding], IndexReach | None]:
    """The profile's pins and findings, and (PostgreSQL) what a call must reach to go without index
    scans (`Profile.index_reach`; None: the profile has none)."""
    pins, findings = engine.profile.scan_pins(conn, masked, default_schema)  # type: ignore[attr-defined]
    reach = getattr(engine.profile, "index_reach", None)
    return pins, findings, None if reach is None else reach(conn, masked, default_schema)


def partition_findings(engine: SqlEngine, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """The start-up findings of a partition key over a masked column (`doctor --mask` reports them
    as start-up refuses them; `--allow partition-order:T`)."""
    if getattr(engine.profile, "scan_pins", None) is None or not masked:
        return []
    with engine.session(30.0, "startup-masks") as (session, _):
        _, findings = engine.profile.scan_pins(session, masked, None)  # type: ignore[attr-defined]
    return [f for f in findings if f.code == "partitioned-masked"]


def index_scans_allowed(tree: exp.Expr, known: KnownSchema) -> bool:
    """Whether a masked call of `tree` may keep index scans: it reaches no relation whose read may
    follow a masked index, and calls no user function that may (`Profile.index_reach`, read with
    the pins; None, a profile without one: no). Tables are matched by casefolded name in any
    schema, a CTE named like one too: more pins, never fewer."""
    reach: IndexReach | None = known.index_reach
    if reach is None or reach.always:
        return False
    if not reach.relations:
        return True
    # a key is `schema.name`, and either may hold a dot (rtM F1: `public.hr.directory`): a name
    # matches every key it ends, whatever schema it resolves in
    tables = (t for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier))
    if any(key.endswith(f".{t.name.casefold()}") for t in tables for key in reach.relations):
        return False
    for call in tree.find_all(exp.Func):  # a built-in's every spelling: a user's may share one
        called = [call.name] if isinstance(call, exp.Anonymous) else call.sql_names()
        if any(str(n).casefold() in reach.functions for n in called):
            return False
    return True


def pin_state(known: KnownSchema) -> tuple[object, object]:
    """What the scan pins of the next call depend on; a call during which it moved is planned again."""
    return known.scan_pins, known.index_reach


def _refuse(findings: list[Finding], allow: Collection[str]) -> None:
    refused = []
    for finding in findings:
        if finding.opt_in in allow:
            log.warning("masks: --allow %s: %s", finding.opt_in, finding.message)
        else:
            refused.append(finding)
    if refused:
        lines = "\n".join(f"  {f.line()}" for f in refused)
        raise SqlConfigError(f"--mask: a table's physical order follows a masked column:\n{lines}")


def pins_check(
    known: KnownSchema, masked: Mapping[str, frozenset[str]], allow: Collection[str]
) -> Callable[[SqlEngine, Connection], None]:
    """`enforce_scan_pins` inside a serving call's session (a re-verification's `Verify`): an index or
    key added or dropped while serving is pinned, or refused, as at start-up (red team rte F3)."""
    frozen = dict(masked)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        enforce_scan_pins(engine, known, frozen, allow, conn)

    return verify


def _readable_only(
    engine: SqlEngine, conn: Connection, masked: Mapping[str, frozenset[str]]
) -> dict[str, frozenset[str]]:
    """The masked tables this session's identity can read at all (`Profile.readable`; all where the
    profile cannot say): a table it reads no column of answers it in no order. The masks are the
    account's, a mapped role may hold no grant on some (MariaDB's STATISTICS then lists none of the
    table's keys, which read as "no visible PRIMARY KEY": every call of that role was refused)."""
    listed = engine.profile.readable(conn)
    if listed is None:
        return dict(masked)
    seen = {(None if s is None else s.casefold(), n.casefold()) for s, n in listed}
    names = {n for _, n in seen}
    out: dict[str, frozenset[str]] = {}
    for key, columns in masked.items():
        schema, table = split_key(key)  # unqualified: any schema's (the name path's is not read here)
        name = table.casefold()
        if name in names if schema is None else {(schema.casefold(), name), (None, name)} & seen:
            out[key] = columns
    return out


def pin_findings_check(
    known: KnownSchema,
    masked: Mapping[str, frozenset[str]],
    allow: Collection[str],
    account: Mapping[str, frozenset[str]] | None = None,
) -> Callable[[SqlEngine, Connection], None]:
    """`pins_check`'s refusal only, for one role of a role map (`rolecheck.guard_roles`): the
    findings of the masked tables the role can read (a CLUSTER on a masked index while serving, red
    team rtd F1), leaving the server's pins (`known.scan_pins`, shared by the roles) as the account's
    check set them; PostgreSQL's `known.index_reach` is read again over `account` (the server's
    masks: the catalog it reads is any login's), so an index made while roles serve pins their calls."""
    frozen, every = dict(masked), dict(account or {})

    def verify(engine: SqlEngine, conn: Connection) -> None:
        reflect = getattr(engine.profile, "scan_pins", None)
        if reflect is None or not frozen:
            return
        readable = _readable_only(engine, conn, frozen)
        if readable:
            _refuse(reflect(conn, readable, known.default_schema)[1], allow)
        reach = getattr(engine.profile, "index_reach", None)
        if reach is not None and every:  # read by any login: a role's call moves it too (pincost)
            known.index_reach = reach(conn, every, known.default_schema)

    return verify
