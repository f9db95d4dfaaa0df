"""The engine protocol: run one statement read-only, return at most `limit` rows, close."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sqlglot import exp

    from mcpkit.sql.clipping import CellBudget

__all__ = ["Column", "Engine", "Params", "Rows"]

Params = Mapping[str, Any]
"""Named bind parameters; the SQL names them `:name` (None: the SQL is sent exactly as given)."""


@dataclass(frozen=True)
class Column:
    """A result column: its name and, where the driver tells, the database's type name."""

    name: str
    type_name: str | None = None


@dataclass(frozen=True)
class Rows:
    """A result: at most `limit` rows, whether more existed, and how long the database took."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    more: bool
    elapsed_s: float
    call_id: str = field(default="")
    cut_for_size: bool = False
    """True when fewer rows than asked were fetched because the row is wide (more may exist)."""


@runtime_checkable
class Engine(Protocol):
    """Runs one statement in a read-only session; caps, admission and shaping live above it."""

    @property
    def dialect(self) -> str:
        """The sqlglot dialect name of the database (`postgres`, `mysql`, `sqlite`, ...)."""
        ...

    def execute(
        self,
        sql: str,
        params: Params | None,
        limit: int,
        timeout_s: float,
        call_id: str,
        *,
        clip: CellBudget | None = None,
        tree: exp.Expr | None = None,
    ) -> Rows:
        """Run `sql` read-only, stop it after `timeout_s`, fetch at most `limit` rows (+1 to see more);
        `tree` is admission's parse of `sql`, where known.

        Raises:
            QueryFailed: the database failed the query (masked message).
            QueryTimeout: the deadline passed; the database work was stopped.
        """
        ...

    def close(self) -> None:
        """Release every connection."""
        ...
