"""Start-up checks and doctor probes: who the account is, what it can write, whether limits hold."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Final, Literal

from sqlalchemy import text

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.profiles import AccountReport, Finding
from mcpkit.sql.profiles.base import ConnectionBudget, merge_findings

__all__ = [
    "DEFAULT_BACKEND_MEMORY",
    "UNBOUNDED_MEMORY",
    "AccountReport",
    "Finding",
    "ProbeResult",
    "backend_memory",
    "ensure_bounded_memory",
    "ensure_safe_account",
    "inspect_account",
    "parse_memory",
    "probe_read_only",
    "probe_timeout",
    "refuse_cost_oracle",
]

log = logging.getLogger("mcpkit.sql")

_PROBE_TIMEOUT_S: Final = 1.0
_MEMORY_PROBE_S: Final = 30.0
_GIB: Final = 1024**3
_UNITS: Final = {"": 1, "k": 1024, "m": 1024**2, "g": _GIB}
DEFAULT_BACKEND_MEMORY: Final = _GIB
"""`--backend-memory`: what one database process running a call may allocate (1 GiB)."""
MIN_BACKEND_MEMORY: Final = 64 * 1024**2
UNBOUNDED_MEMORY: Final = "unbounded-memory"
"""The `--allow` name that serves although the database's memory per call is not proven bounded."""


@dataclass
class ProbeResult:
    """One doctor probe: ok or not, and a sentence for the operator."""

    ok: bool
    detail: str


def inspect_account(
    engine: SqlEngine,
    call_id: str = "startup",
    allowed: Collection[str] = (),
    connections: ConnectionBudget | None = None,
    *,
    fingerprinted: bool = False,
) -> AccountReport:
    """Connect as the server would and describe the account, with everything it must not hold.

    Args:
        engine: The engine (a role engine: after its SET ROLE).
        call_id: For the log and the database's session identity.
        allowed: Opt-ins for objects (`function:schema.name`, `routine:db.name`, ...).
        connections: What the server opens as this login; the login's connection limit is
            checked against it where the database has one (None: not checked).
        fingerprinted: Also read the catalog fingerprint in the same session (`report.fingerprint`),
            so the re-verification while serving starts from what was just verified.

    Returns:
        The report; its `findings` are what `ensure_safe_account` refuses.
    """
    paused = engine.guard.paused() if engine.guard is not None else nullcontext()  # this is the check
    with paused, engine.session(30.0, call_id) as (conn, dbapi):
        report = engine.profile.inspect(conn, engine.url, frozenset(allowed))
        if connections is not None:
            report.findings += engine.profile.connection_findings(conn, connections)
            report.warnings += engine.profile.connection_warnings(conn, connections)
        if fingerprinted:
            report.fingerprint = engine.profile.catalog_fingerprint(dbapi)
        return report


def ensure_safe_account(
    report: AccountReport, allow_superuser: bool = False, allow: Collection[str] = ()
) -> list[Finding]:
    """Refuse every finding the operator did not opt into; warn for the accepted ones.

    Args:
        report: From `inspect_account`.
        allow_superuser: The same as `allow=["superuser"]` (it no longer accepts anything else).
        allow: The `--allow` opt-ins.

    Returns:
        The findings accepted by an opt-in (each was logged as a warning).

    Raises:
        SqlConfigError: one line per refused finding: what the account holds, and the SQL that
            removes it.
    """
    accepted = set(allow) | ({"superuser"} if allow_superuser else set())
    refused = [f for f in report.findings if f.opt_in is None or f.opt_in not in accepted]
    if refused:
        lines = "\n".join(f"  {f.line()}" for f in merge_findings(refused))
        raise SqlConfigError(
            f"the database account {report.user} holds what a read-only server must not; "
            f"remove it (or opt in where offered):\n{lines}"
        )
    kept = [f for f in report.findings if f not in refused]
    for w in report.warnings:
        log.warning("%s", w.line())
    for f in kept:
        log.warning("serving although %s, as --allow %s asked", f.message, f.opt_in)
    if report.writable:
        shown = ", ".join(report.writable[:10]) + (" ..." if len(report.writable) > 10 else "")
        log.warning("the account can write %d table(s) it can read: %s", len(report.writable), shown)
    if not report.read_only_enforced:
        log.warning(
            "%s: no database-enforced read-only session is known; rely on the account's grants",
            report.dialect,
        )
    return kept


def probe_read_only(engine: SqlEngine) -> ProbeResult:
    """Try a write inside the read-only session; it must be refused by the database."""
    name = f"mcpkit_doctor_probe_{secrets.token_hex(4)}"
    try:
        engine.execute(f"CREATE TABLE {name} (a INTEGER)", None, 1, 10.0, "doctor-ro")
    except QueryFailed as exc:
        if exc.kind in ("read_only", "permission"):
            return ProbeResult(True, "a write inside the read-only session was refused by the database")
        return ProbeResult(False, f"the write probe failed for another reason ({exc.kind})")
    except QueryTimeout:
        return ProbeResult(False, "the write probe timed out")
    try:  # the write went through: read-only is not enforced; remove the probe table
        with engine.sa_engine.begin() as conn:
            conn.execute(text(f"DROP TABLE {name}"))
    except Exception:
        log.exception("doctor: could not drop %s", name)
    return ProbeResult(False, "a write inside the session SUCCEEDED: the session is not read-only")


def probe_timeout(engine: SqlEngine, timeout_s: float = _PROBE_TIMEOUT_S) -> ProbeResult:
    """Run a query that never ends with a short timeout: it must stop in time and the server answer after."""
    forever = engine.profile.forever_sql
    if forever is None:
        return ProbeResult(False, f"no timeout probe is known for {engine.dialect}")
    started = time.monotonic()
    try:
        engine.execute(forever, None, 1, timeout_s, "doctor-timeout")
    except QueryTimeout:
        pass
    except QueryFailed as exc:
        return ProbeResult(False, f"the endless probe failed instead of timing out ({exc.kind})")
    took = time.monotonic() - started  # an interrupted MySQL SLEEP returns a row instead of failing
    try:
        engine.execute("SELECT 1", None, 1, 5.0, "doctor-after")
    except (QueryFailed, QueryTimeout):
        return ProbeResult(False, "the server did not answer after the timeout")
    ok = took < timeout_s + 3.0
    return ProbeResult(ok, f"an endless query was stopped after {took:.1f} s (limit {timeout_s:g} s)")


def refuse_cost_oracle(engine: SqlEngine, allow: Sequence[str], who: str) -> None:
    """Refuse `--max-cost` where the database hides rows from `who` that the planner counts, unless allowed.

    PostgreSQL plans from statistics gathered over every row and uses them under RLS for any
    leakproof operator (text `=` is one): `WHERE secret = 'guess'` over another tenant's rows
    changes the estimate, so refused-or-answered would tell whether the guess is there. The same
    holds for a table `who` reads through column grants only, and for a view that reads with its
    owner's rights under the owner's row-level security or filters on the current user (the
    estimate is the base table's).

    Raises:
        SqlConfigError: such tables or views exist and `--allow cost-under-rls` was not given.
    """
    with engine.session(30.0, "startup-cost") as (conn, _):
        tables = engine.profile.row_filtered_tables(conn)
        views = engine.profile.row_filtered_views(conn)
    if not tables and not views:
        return
    parts = [f"row-level security filters {', '.join(tables)} for {who}"] if tables else []
    if views:
        parts.append(f"views read for {who}, with their owner's rights, only some rows: {', '.join(views)}")
    line = (
        f"--max-cost: {'; '.join(parts)}; the planner's estimates come from statistics over every "
        "row, so a cost refusal would tell about rows hidden from it; drop --max-cost (the statement "
        "timeout still bounds each call)"
    )
    if "cost-under-rls" not in allow:
        raise SqlConfigError(line + ", or accept it with --allow cost-under-rls")
    log.warning("--allow cost-under-rls: %s", line)


def parse_memory(value: str) -> int:
    """`--backend-memory`: bytes, or K/M/G (KiB, MiB, GiB), from 64 MiB to 1 GiB.

    Larger budgets are refused, not probed: PostgreSQL's largest single allocation is 1 GiB, so a
    probe of more must hold several values, i.e. write nearly the whole budget into the production
    server's memory at every start, where a limit at or below 1 GiB is refused in milliseconds
    without touching any. Refusing keeps every budget mcpkit prints one the probe proved.

    >>> parse_memory("512M"), parse_memory("1GiB"), parse_memory("67108864")
    (536870912, 1073741824, 67108864)

    Raises:
        ValueError: not a size, or outside 64 MiB .. 1 GiB.
    """
    text = value.strip().lower().removesuffix("b").removesuffix("i")
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "")
    if not number.isdigit():
        raise ValueError(f"{value!r} is not a size (bytes, or a number with K, M or G)")
    size = int(number) * _UNITS[unit]
    if not MIN_BACKEND_MEMORY <= size <= _GIB:
        raise ValueError(
            f"{value} is outside 64M..1G: one allocation proves at most 1 GiB (PostgreSQL's largest "
            "value), and a process needs more than 64M to serve calls"
        )
    return size


def _shown(size: int) -> str:
    return f"{size / _GIB:g} GiB" if size >= _GIB else f"{size / 1024**2:g} MiB"


def backend_memory(
    engine: SqlEngine, budget: int, allow: Collection[str]
) -> tuple[Literal["ok", "warn", "fail"], str] | None:
    """Prove that the database process running the calls cannot allocate `budget` bytes.

    The engine bounds it or nothing does: the parser's guards are a second line. Runs the
    profile's probe in mcpkit's own session (not through admission); skipped, with a warning, under
    `--allow unbounded-memory`.

    Returns:
        `ok` (refused by the database), `warn` (opted out), `fail` (held: no limit at or below
        `budget`), each with one line; None where the profile has no such proof.
    """
    fix = engine.profile.memory_fix
    if fix is None:
        return None
    if UNBOUNDED_MEMORY in allow:
        return "warn", (
            f"--allow {UNBOUNDED_MEMORY}: the database's memory per call is not verified; one call "
            "may take the host's memory (only the parser's guards bound it)"
        )
    hosts = engine.profile.memory_hosts(engine.url.host, engine.url.query)
    if len(hosts) > 1:
        return "fail", (
            f"the URL names {len(hosts)} database hosts ({', '.join(hosts)}): the memory probe proves "
            "the one it reaches, and calls may run on another (failover, load_balance_hosts); name "
            f"one host per server, or accept an unbounded backend with --allow {UNBOUNDED_MEMORY}"
        )
    started = time.monotonic()
    paused = engine.guard.paused() if engine.guard is not None else nullcontext()
    try:
        with paused, engine.session(_MEMORY_PROBE_S, "startup-memory") as (_, dbapi):
            bounded = engine.profile.memory_bounded(dbapi, budget)
    except QueryTimeout:  # a refused allocation fails in milliseconds: this one was granted
        bounded = False
    took = (time.monotonic() - started) * 1000
    if bounded:
        return "ok", (
            f"the database refused one allocation of {_shown(budget)} in a backend (out of memory "
            f"in {took:.0f} ms): a call cannot take more"
        )
    systemd = f"{budget // _GIB}G" if budget % _GIB == 0 else f"{-(-budget // 1024**2)}M"
    fix = fix.format(systemd=systemd, kib=-(-budget // 1024), bytes=budget)
    return "fail", (
        f"a database backend allocated {_shown(budget)} (--backend-memory) in one value: nothing "
        f"bounds a call's memory; {fix}"
    )


def ensure_bounded_memory(engine: SqlEngine, budget: int, allow: Collection[str]) -> None:
    """`backend_memory` at start-up: refuse to serve unless proven or opted out (logged).

    Raises:
        SqlConfigError: one line naming the missing limit and how to set it, or saying the probe
            failed for another reason (a lost connection stays `QueryFailed`: not answering).
    """
    try:
        verdict = backend_memory(engine, budget, allow)
    except QueryFailed as exc:
        if exc.kind == "connection":
            raise
        raise SqlConfigError(f"the backend memory probe failed ({exc.kind}); see the log (-v)") from None
    if verdict is None:
        return
    status, line = verdict
    if status == "fail":
        raise SqlConfigError(line)
    if status == "warn":
        log.warning("%s", line)
    else:
        log.info("backend memory: %s", line)


def refuse_cost_under_masks(allow: Sequence[str]) -> None:
    """Refuse `--max-cost` with masks unless `--allow cost-under-masks` accepts the oracle.

    PostgreSQL costs a scan from the table's current page count, the size of its masked values
    too: padding a query with `generate_series(1, K)` until it is refused tells that count to the
    page in about 20 calls, though the refusal prints no estimate (red team rt20mask F5).

    Raises:
        SqlConfigError: `--allow cost-under-masks` was not given.
    """
    line = (
        "--max-cost with --mask: whether a query is refused tells the planner's estimate, which "
        "counts the pages masked values fill; drop --max-cost (the statement timeout still bounds "
        "each call)"
    )
    if "cost-under-masks" not in allow:
        raise SqlConfigError(line + ", or accept it with --allow cost-under-masks")
    log.warning("--allow cost-under-masks: %s", line)
