"""`CallAudit`: the first middleware of the server's pipeline writes every call's two entries.

    start entry ──stored──> tool runs ──> end entry ──stored──> answer goes to the client

`stage` runs inside only the core's `record` stage and the routing's `choose` (which names the
database and writes nothing), so it sees every `tools/call`: answered, refused, invalid, rate limited,
cached or naming an unknown tool. Before anything else runs it stores the start (time, tool as named,
principal, client, the source database, the arguments as sent and the statement with their SHA-256);
the routing's identity resolution runs inside it, so a caller refused there is recorded. After the
pipeline is done it stores the end (outcome, duration, and what the tool handler noted for the
call id: the SQL sent, rows, the refusal reason, operator-only detail). Only then does the answer
leave. If the store cannot take an entry, the call is refused with a retryable error: nothing runs
or answers unrecorded.

Arguments are recorded as sent. Only values the server declared secret are replaced by
`[REDACTED]` (report parameters with `secret: true`, see `register`): nothing is redacted because
its name looks like a credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from mcpkit.errors import ToolError
from mcpkit.logs import REDACTED
from mcpkit.pipeline import UnknownTool
from mcpkit.result import Outcome, error_outcome
from mcpkit.sql.audit.log import AuditLog, AuditUnavailable
from mcpkit.sql.audit.record import kept, kept_name, utc_now
from mcpkit.sql.routing import SOURCE_KEY

if TYPE_CHECKING:
    from mcpkit.context import Context
    from mcpkit.pipeline import Call, CallNext

__all__ = ["NOTE_FIELDS", "CallAudit"]

log = logging.getLogger("mcpkit.sql.audit")

NOTE_FIELDS: Final = frozenset(
    {"principal", "client_name", "client_version", "sql", "rows", "truncated", "reason", "detail"}
)
_MAX_OPEN: Final = 10_000  # notes of calls whose end never came (a handler past its deadline)
_ENTRY_VERSION: Final = 1


def _unavailable(what: str) -> Outcome:
    return error_outcome(
        ToolError(
            f"The audit log is unavailable, so {what}; try again later.",
            retryable=True,
            data={"reason": "audit_unavailable"},
            expose_data=True,
        )
    )


class CallAudit:
    """Record every call of a server in an `AuditLog`: `Server(..., middleware=[calls.stage])`.

    >>> from mcpkit.pipeline import Call
    >>> from mcpkit.sql.audit.store import open_store
    >>> calls = CallAudit(AuditLog(open_store(dsn="sqlite:///:memory:")))
    >>> args = {"query": "SELECT 1", "api_key": "k-1"}
    >>> entry = calls.start_entry(Call("c1", "execute_query", args, make_context=print, identity="ann"))
    >>> entry["statement"], entry["arguments"]  # as sent: nothing guessed secret by its name
    ('SELECT 1', '{"query":"SELECT 1","api_key":"k-1"}')
    >>> calls.audit.close()

    Args:
        audit: Where entries go.
    """

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self._notes: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._statements: dict[str, tuple[str | None, str | None]] = {"execute_query": ("query", None)}
        self._secrets: dict[str, frozenset[str]] = {}

    def register(
        self,
        tool: str,
        *,
        statement: str | None = None,
        statement_argument: str | None = None,
        secret_arguments: Iterable[str] = (),
    ) -> None:
        """Say what a tool's statement is and which of its arguments are secret.

        Args:
            tool: The tool name.
            statement: Its fixed statement (a report's SQL).
            statement_argument: The argument that holds the statement (execute_query: `query`).
            secret_arguments: Arguments recorded as `[REDACTED]`.
        """
        self._statements[tool] = (statement_argument, statement)
        self._secrets[tool] = frozenset(secret_arguments)

    # --- what handlers add --------------------------------------------------------------------

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
        """Around a handler's work: note why a `ToolError` ended the call.

        The error's `data.reason` and, when it has one, its operator-only `detail` attribute
        are noted; the error propagates unchanged.
        """
        try:
            yield
        except ToolError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            detail = getattr(exc, "detail", None)
            self.note(ctx.call_id, reason=data.get("reason"), detail=str(detail) if detail else None)
            raise

    # --- the pipeline stage -------------------------------------------------------------------

    async def stage(self, call: Call, call_next: CallNext) -> Outcome:
        """The middleware: start stored, the rest of the chain, end stored, then the answer."""
        started = time.perf_counter()
        try:
            await self.audit.write(self.start_entry(call))
        except AuditUnavailable as exc:
            log.error("[%s] audit unavailable, call to %r refused: %s", call.call_id, call.name[:128], exc)
            outcome = _unavailable("the call was not run")
            outcome.meta.update(callId=call.call_id)
            return outcome
        try:
            outcome = await call_next(call)
        except UnknownTool:
            with contextlib.suppress(AuditUnavailable):  # a protocol error carries no data to withhold
                await self._end(call, started, "UNKNOWN_TOOL", None)
            raise
        except asyncio.CancelledError:
            self.audit.submit(self.end_entry(call, started, "CANCELLED", None), lambda _: None)
            raise
        except ToolError as err:  # the outermost stage turns it into the answer: record it first
            if not await self._ended(call, started, err.code, err.data):
                return self._withheld(call)
            raise
        except Exception:
            if not await self._ended(call, started, "INTERNAL", None):
                return self._withheld(call)
            raise
        if not await self._ended(call, started, outcome.code or "OK", outcome.data):
            return self._withheld(call)
        return outcome

    def _withheld(self, call: Call) -> Outcome:
        withheld = _unavailable("the answer was withheld")
        withheld.meta.update(callId=call.call_id)
        return withheld

    async def _ended(self, call: Call, started: float, code: str, data: Any) -> bool:
        try:
            await self._end(call, started, code, data)
        except AuditUnavailable:
            return False
        return True

    async def _end(self, call: Call, started: float, code: str, data: Any) -> None:
        try:
            await self.audit.write(self.end_entry(call, started, code, data))
        except AuditUnavailable as exc:
            log.error("[%s] audit unavailable, answer of %r withheld: %s", call.call_id, call.name[:128], exc)
            raise

    def start_entry(self, call: Call) -> dict[str, Any]:
        """The write-ahead entry of a call: who, which tool, with what."""
        argument, fixed = self._statements.get(call.name, (None, None))
        raw = call.arguments.get(argument) if argument else fixed
        statement = raw if isinstance(raw, str) else None
        secret = self._secrets.get(call.name, frozenset())
        shown: Any = {k: (REDACTED if k in secret else v) for k, v in call.arguments.items()}
        if call.redactor is not None and call.redactor.has_values:  # the server's declared secrets
            shown = call.redactor.scrub(shown)
            statement = call.redactor.scrub(statement)
        arguments = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)
        args_kept, args_hash, args_chars = kept(arguments)
        stmt_kept, stmt_hash, stmt_chars = kept(statement)
        client = call.client
        return {
            "v": _ENTRY_VERSION,
            "kind": "start",
            "call_id": call.call_id,
            "at": utc_now().isoformat(),
            "tool": kept_name(call.name),
            "principal": call.principal,
            "identity": call.identity,
            "source": call.state.get(SOURCE_KEY),
            "client_name": client.name if client else None,
            "client_version": client.version if client else None,
            "arguments": args_kept,
            "arguments_sha256": args_hash,
            "arguments_chars": args_chars,
            "statement": stmt_kept,
            "statement_sha256": stmt_hash,
            "statement_chars": stmt_chars,
        }

    def end_entry(self, call: Call, started: float, code: str, data: Any) -> dict[str, Any]:
        """The entry that closes a call: how it ended and what the handler noted."""
        with self._lock:
            noted = self._notes.pop(call.call_id, {})
        data = data if isinstance(data, dict) else {}
        return {
            "v": _ENTRY_VERSION,
            "kind": "end",
            "call_id": call.call_id,
            "at": utc_now().isoformat(),
            "tool": kept_name(call.name),
            "outcome": code,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "cached": call.cached,
            "sql": noted.get("sql"),
            "rows": noted.get("rows"),
            "truncated": noted.get("truncated"),
            "reason": noted.get("reason") or (str(data["reason"]) if data.get("reason") else None),
            "detail": noted.get("detail"),
        }
