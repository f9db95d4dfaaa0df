"""Any other SQLAlchemy backend: best effort, the account's grants are the guard."""

from __future__ import annotations

from mcpkit.sql.profiles.base import Profile

__all__ = ["GenericProfile"]


class GenericProfile(Profile):
    """No database-enforced read-only session or timeout is known here; the watchdog cancels.

    Use a least-privilege account: `mcpkit sql doctor` reports this dialect as unverified.
    """

    def __init__(self, dialect: str) -> None:
        super().__init__(dialect)
        self.name = dialect
