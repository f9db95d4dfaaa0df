"""Any other SQLAlchemy dialect: best effort, the account's grants are the guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import URL

from mcpkit.sql.engines.session import Outcome

__all__ = ["GenericSession"]


class GenericSession:
    """No database-enforced read-only session or timeout is known here; the watchdog cancels.

    Use a least-privilege account: `mcpkit sql doctor` reports this dialect as unverified.
    """

    read_only_enforced = False

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    def engine_options(self, url: URL) -> dict[str, Any]:
        """No extra options."""
        return {}

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Nothing to set up."""

    def run(self, cursor: Any, sql: str, call_id: str) -> None:
        """Run one statement."""
        cursor.execute(sql)

    def type_names(self, dbapi: Any, description: Sequence[Any]) -> list[str | None]:
        """Unknown."""
        return [None for _ in description]

    def interrupt(self, dbapi: Any, url: URL) -> None:
        """Cancel where the driver can."""
        for name in ("cancel", "interrupt"):
            method = getattr(dbapi, name, None)
            if callable(method):
                method()
                return

    def end(self, dbapi: Any) -> None:
        """Roll back."""
        dbapi.rollback()

    def classify(self, exc: BaseException) -> Outcome:
        """Nothing is known about this driver's errors."""
        return "other"
