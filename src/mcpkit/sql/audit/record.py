"""One audit record per call: who called which tool with what, what was sent, and how it ended."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any, Final

__all__ = ["OUTCOMES", "AuditRecord", "utc_now"]

OUTCOMES: Final = (
    "OK",
    "REFUSED",
    "INVALID_PARAMS",
    "TOOL_ERROR",
    "TIMEOUT",
    "RATE_LIMITED",
    "UNKNOWN_TOOL",
    "INTERNAL",
)


def utc_now() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class AuditRecord:
    """One call, answered or refused.

    >>> r = AuditRecord(call_id="c1", tool="execute_query", outcome="OK", rows=3)
    >>> r.to_json()["call_id"], r.at.tzinfo is not None
    ('c1', True)

    Attributes:
        call_id: The call id (also the database session's application_name / comment).
        tool: The tool called.
        outcome: `OK` or the error code (`REFUSED`, `INVALID_PARAMS`, `TIMEOUT`, ...).
        at: When the call finished, UTC.
        principal: The authenticated caller (HTTP with auth), else None.
        identity: The caller as rate limits see it (principal, or client name/version).
        client_name: The client's name from `initialize`.
        client_version: The client's version.
        arguments: The arguments as redacted JSON text (`mcpkit.logs.redact_arguments`).
        sql: The SQL actually sent (after the row-cap rewrite and masking), when one was.
        rows: Rows returned.
        truncated: Whether more rows existed.
        duration_ms: Time the call took, end to end.
        reason: The stable refusal or failure reason (`write`, `masked_column`, `timeout`, ...).
        detail: Operator-only detail (database error text, masking detail); never sent to the model.
    """

    call_id: str
    tool: str
    outcome: str
    at: dt.datetime = field(default_factory=utc_now)
    principal: str | None = None
    identity: str | None = None
    client_name: str | None = None
    client_version: str | None = None
    arguments: str | None = None
    sql: str | None = None
    rows: int | None = None
    truncated: bool | None = None
    duration_ms: float | None = None
    reason: str | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (time as ISO 8601 with its UTC offset)."""
        out = asdict(self)
        out["at"] = self.at.isoformat()
        return out
