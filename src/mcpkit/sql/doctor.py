"""`mcpkit sql doctor`: connect as the server would and report what holds, one line per check."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from mcpkit.sql.checks import inspect_account, probe_read_only, probe_timeout
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService

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


def diagnose(engine: SqlEngine, *, timeout_s: float = 1.0) -> list[Check]:
    """Run every check; stop after `reachable` when the database cannot be reached.

    Args:
        engine: The engine, as the server would build it.
        timeout_s: Timeout the statement-timeout probe uses.

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
    report = inspect_account(engine, call_id="doctor")
    checks.append(Check("ok", "dialect", f"{engine.dialect} ({report.version.split(' on ')[0]})"))
    if not engine.profile.has_accounts:
        checks.append(Check("ok", "superuser", "SQLite has no accounts; the file is opened read-only"))
    elif report.superuser:
        checks.append(Check("fail", "superuser", f"{report.user} is a superuser ({report.superuser_reason})"))
    else:
        checks.append(Check("ok", "superuser", f"{report.user} is not a superuser"))
    if report.writable:
        shown = ", ".join(report.writable[:5]) + (" ..." if len(report.writable) > 5 else "")
        checks.append(Check("warn", "writable tables", f"{len(report.writable)}: {shown}"))
    else:
        checks.append(Check("ok", "writable tables", "none"))
    ro = probe_read_only(engine)
    checks.append(Check("ok" if ro.ok else "fail", "read-only session", ro.detail))
    to = probe_timeout(engine, timeout_s)
    checks.append(Check("ok" if to.ok else "fail", "statement timeout", to.detail))
    checks.append(_lint(engine))
    return checks
