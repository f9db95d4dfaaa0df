"""What differs per database: opening read-only, arming the timeout, interrupting, reading errors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from sqlalchemy.engine import URL

from mcpkit.sql.errors import FailureKind

__all__ = ["Outcome", "SessionKind", "safe_call_id"]

Outcome = FailureKind | Literal["timeout"]

_CALL_ID = re.compile(r"[^A-Za-z0-9._:-]")


def safe_call_id(call_id: str) -> str:
    """The call id reduced to characters safe in a comment, a setting or a log line.

    >>> safe_call_id("abc-1; DROP */")
    'abc-1DROP'
    """
    return _CALL_ID.sub("", call_id)[:64] or "call"


class SessionKind(Protocol):
    """Per-database behaviour `SqlEngine` delegates to; one implementation per backend."""

    dialect: str
    read_only_enforced: bool

    def engine_options(self, url: URL) -> dict[str, Any]:
        """Extra `create_engine` keyword arguments (connect args, creator)."""
        ...

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Open a read-only transaction on a fresh connection and arm the database's own timeout."""
        ...

    def run(self, cursor: Any, sql: str, call_id: str) -> None:
        """Execute one statement exactly as given (no parameter processing)."""
        ...

    def type_names(self, dbapi: Any, description: Sequence[Any]) -> list[str | None]:
        """The database's type name per result column, where the driver tells."""
        ...

    def interrupt(self, dbapi: Any, url: URL) -> None:
        """Stop the running statement from another thread (the watchdog's backstop)."""
        ...

    def end(self, dbapi: Any) -> None:
        """Roll back; called in every case, before the connection is closed."""
        ...

    def classify(self, exc: BaseException) -> Outcome:
        """Map a driver exception to a failure kind or `timeout`."""
        ...
