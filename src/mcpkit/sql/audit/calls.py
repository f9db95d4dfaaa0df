"""`CallAudit`: every call through the server's pipeline becomes one audit record.

The core's outermost stage writes one operator record per call to the `mcpkit.calls` logger
(call id, tool, caller identity, outcome, duration, redacted arguments), for every call: answered,
refused, invalid or unknown. `CallAudit.attach()` puts a logging handler there that turns each
into an `AuditRecord`, merged with what the tool handler noted for that call id (the SQL sent,
rows, principal, client, the refusal reason and operator-only detail).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from mcpkit.errors import ToolError
from mcpkit.logs import CALL_LOGGER
from mcpkit.sql.audit.log import AuditLog
from mcpkit.sql.audit.record import AuditRecord

if TYPE_CHECKING:
    from mcpkit.context import Context

__all__ = ["NOTE_FIELDS", "CallAudit"]

NOTE_FIELDS: Final = frozenset(
    {"principal", "client_name", "client_version", "sql", "rows", "truncated", "reason", "detail"}
)
_MAX_OPEN: Final = 10_000  # notes of calls whose record never came (should not happen)


class _Handler(logging.Handler):
    def __init__(self, owner: CallAudit) -> None:
        super().__init__(level=logging.INFO)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        call = getattr(record, "call", None)
        if isinstance(call, dict):
            try:
                self.owner.handle(call)
            except Exception:  # never break the call path over the audit
                self.handleError(record)


class CallAudit:
    """Join the pipeline's call records with handler notes and write them to an `AuditLog`.

    >>> from mcpkit.sql.audit.store import open_store
    >>> audit = AuditLog(open_store(dsn="sqlite:///:memory:"))
    >>> calls = CallAudit(audit)
    >>> calls.note("c1", sql="SELECT 1 LIMIT 26", rows=1)
    >>> rec = calls.handle({"call_id": "c1", "tool": "q", "outcome": "OK", "duration_ms": 2.5})
    >>> rec.sql, rec.rows, rec.duration_ms
    ('SELECT 1 LIMIT 26', 1, 2.5)
    >>> audit.close()

    Args:
        audit: Where records go.
    """

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self._notes: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._handler: _Handler | None = None
        self._level: int | None = None

    def note(self, call_id: str, **fields: Any) -> None:
        """Add fields (`sql`, `rows`, `truncated`, `reason`, `detail`, `principal`, ...) to a record."""
        unknown = set(fields) - NOTE_FIELDS
        if unknown:
            raise TypeError(f"unknown audit fields: {sorted(unknown)}")
        with self._lock:
            if call_id not in self._notes and len(self._notes) >= _MAX_OPEN:
                self._notes.pop(next(iter(self._notes)))
            self._notes.setdefault(call_id, {}).update(fields)

    def note_context(self, ctx: Context) -> None:
        """Note the principal and the client's name and version from a handler's context."""
        self.note(
            ctx.call_id,
            principal=ctx.principal,
            client_name=ctx.client.name if ctx.client else None,
            client_version=ctx.client.version if ctx.client else None,
        )

    @contextmanager
    def noting(self, ctx: Context) -> Iterator[None]:
        """Around a handler's work: note who called, and why a `ToolError` ended the call.

        The error's `data.reason` and, when it has one, its operator-only `detail` attribute
        are noted; the error propagates unchanged.
        """
        self.note_context(ctx)
        try:
            yield
        except ToolError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            detail = getattr(exc, "detail", None)
            self.note(ctx.call_id, reason=data.get("reason"), detail=str(detail) if detail else None)
            raise

    def handle(self, call: dict[str, Any]) -> AuditRecord:
        """Build and queue the record of one finished call (a `mcpkit.calls` record's `call` dict)."""
        call_id = str(call.get("call_id", ""))
        with self._lock:
            noted = self._notes.pop(call_id, {})
        identity = call.get("client")
        rec = AuditRecord(
            call_id=call_id,
            tool=str(call.get("tool", "")),
            outcome=str(call.get("outcome", "INTERNAL")),
            identity=str(identity) if identity is not None else None,
            arguments=call.get("arguments"),
            duration_ms=call.get("duration_ms"),
            **noted,
        )
        self.audit.record(rec)
        return rec

    def attach(self, logger: logging.Logger = CALL_LOGGER) -> None:
        """Receive every call record of every server in this process.

        The core emits call records only when its logger is enabled for INFO, so this sets the
        logger's level to INFO when it is higher (handlers further up keep their own levels).
        """
        if self._handler is not None:
            return
        self._handler = _Handler(self)
        logger.addHandler(self._handler)
        if not logger.isEnabledFor(logging.INFO):
            self._level = logger.level
            logger.setLevel(logging.INFO)

    def detach(self, logger: logging.Logger = CALL_LOGGER) -> None:
        """Stop receiving call records (and restore the logger's level if `attach` changed it)."""
        if self._handler is not None:
            logger.removeHandler(self._handler)
            self._handler = None
        if self._level is not None:
            logger.setLevel(self._level)
            self._level = None
