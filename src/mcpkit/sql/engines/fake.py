"""A fake engine for tests of the layers above: a function decides every answer."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from mcpkit.sql.clipping import CellBudget
from mcpkit.sql.engines.base import Column, Params, Rows

__all__ = ["FakeEngine"]


class FakeEngine:
    """An `Engine` whose answers come from `handler(sql) -> (columns, rows)`; records every call.

    >>> fake = FakeEngine(lambda sql: (["n"], [(1,), (2,), (3,)]))
    >>> fake.execute("SELECT n FROM t", None, limit=2, timeout_s=1, call_id="c1").more
    True
    """

    def __init__(
        self,
        handler: Callable[[str], tuple[list[str], list[tuple[object, ...]]]],
        dialect: str = "sqlite",
    ) -> None:
        self._handler = handler
        self._dialect = dialect
        self.calls: list[str] = []
        self.closed = False

    @property
    def dialect(self) -> str:
        """The sqlglot dialect this fake pretends to be."""
        return self._dialect

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
        """Record `sql` and answer with the handler's rows, cut at `limit`."""
        self.calls.append(sql)
        names, rows = self._handler(sql)
        return Rows(
            columns=tuple(Column(n) for n in names),
            rows=tuple(tuple(r) for r in rows[:limit]),
            more=len(rows) > limit,
            elapsed_s=0.0,
            call_id=call_id,
        )

    def close(self) -> None:
        """Mark the fake closed."""
        self.closed = True
