"""One audit record per call: who called which tool with what, what was sent, and how it ended.

A call is stored as two chained entries: `start` (written before the tool runs) and `end` (written
before the answer is sent). `AuditRecord` is the two read back together.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Final

__all__ = ["KEPT_CHARS", "OUTCOMES", "TOOL_CHARS", "AuditRecord", "kept", "kept_name", "utc_now"]

OUTCOMES: Final = (
    "OK",
    "REFUSED",
    "INVALID_PARAMS",
    "TOOL_ERROR",
    "TIMEOUT",
    "RATE_LIMITED",
    "UNKNOWN_TOOL",
    "INTERNAL",
    "CANCELLED",
    "UNFINISHED",
)
"""`CANCELLED`: the client cancelled the call (no answer was sent). `UNFINISHED`: the start is on
record but no end (the server stopped mid-call, or the call still runs)."""

KEPT_CHARS: Final = 100_000
"""Statements and arguments are kept whole up to this many characters (execute_query's own limit on
a query); beyond it the first KEPT_CHARS are kept, with the full length and the full text's SHA-256."""


TOOL_CHARS: Final = 128
"""A tool name is kept whole up to this many characters (as a client's name is); a longer one (only an
unknown tool's can be) is kept as its start, `...sha256:` and the full name's SHA-256, 128 in all."""


def kept_name(name: str) -> str:
    """`name`, or its start and full SHA-256 when longer than `TOOL_CHARS`.

    >>> len(kept_name("x" * 3_000_000)), kept_name("x" * 3_000_000)[50:64]
    (128, 'xxxx...sha256:')
    """
    if len(name) <= TOOL_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[: TOOL_CHARS - 74]}...sha256:{digest}"


def utc_now() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


def kept(text: str | None) -> tuple[str | None, str | None, int | None]:
    """`(text kept, SHA-256 of the whole text, its length)`; the text is cut past `KEPT_CHARS`.

    >>> kept("SELECT 1")[1][:12], kept("SELECT 1")[2]
    ('e004ebd5b553', 8)
    """
    if text is None:
        return None, None, None
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text[:KEPT_CHARS], digest, len(text)


@dataclass(frozen=True)
class AuditRecord:
    """One call, answered or refused.

    >>> r = AuditRecord(call_id="c1", tool="execute_query", outcome="OK", rows=3)
    >>> r.to_json()["call_id"], r.at.tzinfo is not None
    ('c1', True)

    Attributes:
        call_id: The call id (also the database session's application_name / comment).
        tool: The tool called, as the caller named it.
        outcome: `OK`, the error code (`REFUSED`, `INVALID_PARAMS`, ...), or `UNFINISHED`.
        at: When the call started, UTC.
        principal: The authenticated caller (HTTP with auth), else None.
        identity: The caller as rate limits see it (principal, or client name/version).
        source: The database the call was routed to (`--dsn NAME=URL`; `default` for one plain
            `--dsn`; `*` for list_tables over every database), None when none was chosen.
        client_name: The client's name from `initialize`.
        client_version: The client's version.
        arguments: The arguments as sent, as JSON; parameters declared secret are `[REDACTED]`.
        arguments_sha256: SHA-256 of the whole arguments text (it is cut past `KEPT_CHARS`).
        arguments_chars: Length of the whole arguments text.
        statement: The statement the caller asked for (execute_query's query, a report's SQL).
        statement_sha256: SHA-256 of the whole statement (it is cut past `KEPT_CHARS`).
        statement_chars: Length of the whole statement.
        sql: The SQL actually sent (after the row-cap rewrite and masking), when one was.
        rows: Rows returned.
        truncated: Whether more rows existed.
        duration_ms: Time the call took, end to end.
        cached: Answered from the result cache.
        reason: The stable refusal or failure reason (`write`, `masked_column`, `timeout`, ...).
        detail: Operator-only detail (database error text, masking detail); never sent to the model.
        ended_at: When the answer was ready, UTC (None while `UNFINISHED`).
        seq: The position of the call's start entry in the hash chain.
    """

    call_id: str
    tool: str
    outcome: str
    at: dt.datetime = field(default_factory=utc_now)
    principal: str | None = None
    identity: str | None = None
    source: str | None = None
    client_name: str | None = None
    client_version: str | None = None
    arguments: str | None = None
    arguments_sha256: str | None = None
    arguments_chars: int | None = None
    statement: str | None = None
    statement_sha256: str | None = None
    statement_chars: int | None = None
    sql: str | None = None
    rows: int | None = None
    truncated: bool | None = None
    duration_ms: float | None = None
    cached: bool | None = None
    reason: str | None = None
    detail: str | None = None
    ended_at: dt.datetime | None = None
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 with their UTC offset)."""
        out = asdict(self)
        out["at"] = self.at.isoformat()
        out["ended_at"] = self.ended_at.isoformat() if self.ended_at else None
        return out
