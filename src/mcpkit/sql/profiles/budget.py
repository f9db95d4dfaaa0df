"""What `mcpkit sql serve` opens as one database login, for the check of the login's connection limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["CONNECTION_MARGIN", "DEFAULT_POOL_SIZE", "ConnectionBudget"]

DEFAULT_POOL_SIZE: Final = 5
"""Connections kept open per database login (`--pool-size`); 0: a new connection per call."""
CONNECTION_MARGIN: Final = 2
"""Connections a login's limit may exceed what the server opens by: a `mcpkit sql doctor` or
`query` run alongside, and a second interrupt under way."""


@dataclass(frozen=True)
class ConnectionBudget:
    """The connections `mcpkit sql serve` opens as one login, for the check of the login's limit.

    Each source's pool holds `pool_size` connections at most (no overflow); the watchdog opens one
    more to `KILL CONNECTION` a statement past its deadline. With `pool_size` 0 each call opens its
    own connection, so mcpkit sets no bound and any finite limit is accepted.

    >>> b = ConnectionBudget(pool_size=5, sources=2)
    >>> b.least, b.most, b.recommended
    (11, 13, 12)
    """

    pool_size: int
    sources: int = 1

    @property
    def least(self) -> int:
        """The pools' connections and the watchdog's: a lower limit refuses calls the pool could run."""
        return max(self.pool_size, 1) * self.sources + 1

    @property
    def most(self) -> int | None:
        """The highest limit accepted (None: any finite one, without a pool)."""
        return None if self.pool_size == 0 else self.least + CONNECTION_MARGIN

    @property
    def recommended(self) -> int:
        """The value the fix and `mcpkit sql grant` print: what is opened, plus one."""
        return self.least + 1

    def judge(self, who: str, limit: int, why: str, kill: str) -> str | None:
        """What is wrong with the login's connection `limit` (<= 0: none) for this budget; None: fits.

        Args:
            who: The login, as the message names it.
            limit: The limit the database applies to it.
            why: Why the limit matters (what a runaway statement holds after its call).
            kill: What the watchdog's own connection sends.

        >>> ConnectionBudget(5).judge("r", 7, "why", "KILL") is None
        True
        >>> ConnectionBudget(5).judge("r", -1, "why", "KILL")
        'r has no connection limit (why; the limit bounds how many)'
        """
        opens = (
            f"the {self.least} connections the server opens ({self.sources} x --pool-size "
            f"{self.pool_size}, and one for the watchdog's {kill})"
            if self.pool_size
            else "the connections the server opens (--pool-size 0: one per call)"
        )
        if limit <= 0:
            return f"{who} has no connection limit ({why}; the limit bounds how many)"
        if self.most is not None and limit > self.most:
            return f"{who} may hold {limit} connections, more than {opens} ({why})"
        if limit < self.least:
            return (
                f"{who} may hold {limit} connections, fewer than {opens}: calls would be refused"
                " as busy and a runaway statement could not be killed"
            )
        return None
