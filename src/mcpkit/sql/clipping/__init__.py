"""Clipping inside the SQL that is sent: no cell larger than the budget ever reaches the driver.

    admitted SQL --describe (LIMIT 0: nothing is read)--> column names and types
                 --wrap: each big-able column clipped in SQL--> SELECT <clipped cells> FROM (<sql>) ...
    wire rows --reassemble--> the original columns, a `Clipped` or `BinarySize` where a cell was cut

Numbers, booleans, dates and other fixed-size values pass untouched (they stay numbers). Text is cut
to a number of characters in SQL; binary values are sent as their size only; anything else of
variable size (JSON, arrays, XML, numeric, vectors, user types) is sent whole when it fits the budget
and as clipped text otherwise. The per-cell budget shrinks with rows x columns, and a wide result
fetches fewer rows (`CellBudget.rows_fit`), so one call's cells stay under `CellBudget.call_bytes`
whatever the data and the width.

Per-engine hooks (one module each), which the engine's profile names (`Profile.clipping`):
`describe` learns the columns inside the call's session, `wrap` writes the clipping SQL. An engine
may also have `run`: PostgreSQL sends the describe and the query wrapped for what an earlier call
described in one round trip, and uses the rows only if the two descriptions match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = [
    "BinarySize",
    "CellBudget",
    "ClipPlan",
    "Clipped",
    "Clipping",
    "Run",
    "StaleDescription",
    "WireColumn",
]

Kind = Literal["fixed", "text", "binary", "other"]

CAP: Final = re.compile(r"\bLIMIT\s+\d+(\s*,\s*\d+|\s+OFFSET\s+\d+)?\s*$", re.IGNORECASE)
"""The row cap admission writes at the end of every query (mcpkit's own generator wrote it)."""


@dataclass(frozen=True)
class Clipped:
    """A cell cut in SQL: `text` is its beginning (text, or the text form of a JSON/array/... value)."""

    text: str


@dataclass(frozen=True)
class BinarySize:
    """A binary cell, sent as its size only."""

    size: int


@dataclass(frozen=True)
class CellBudget:
    """Bytes one call's cells may take on the wire, the per-cell floor and ceiling, and the widest result.

    `call_bytes` is a ceiling, not a target: rows x columns x the per-cell budget never exceeds it.
    Where the floor would break it (a wide result), fewer rows are fetched (`rows_fit`, sent as a
    `LIMIT` in the SQL) and the answer says so; a result wider than `max_columns` is refused.

    >>> CellBudget().cell_bytes(rows=26, columns=4)
    65536
    >>> CellBudget().cell_bytes(rows=501, columns=10)
    3348
    >>> CellBudget().rows_fit(rows=501, columns=100), CellBudget().rows_fit(rows=5001, columns=100)
    (501, 655)
    """

    call_bytes: int = 16 * 1024 * 1024
    min_cell: int = 256
    max_cell: int = 65536
    max_columns: int = 100

    def cell_bytes(self, rows: int, columns: int) -> int:
        """The budget of one cell for a result of `rows` x `columns`."""
        share = self.call_bytes // max(1, rows * max(1, columns))
        return max(self.min_cell, min(self.max_cell, share))

    def rows_fit(self, rows: int, columns: int) -> int:
        """Rows (at most `rows`, at least 2) whose cells fit `call_bytes` at the per-cell floor."""
        return max(2, min(rows, self.call_bytes // (max(1, columns) * self.min_cell)))

    def fit(self, rows: int, columns: int) -> int:
        """`rows_fit`, for a result the server may send at all: one wider than `max_columns` is refused.

        Raises:
            Refused: `too_wide`, before anything is sent.
        """
        if columns > self.max_columns:
            refuse(
                "too_wide",
                f"The result has {columns} columns, over this server's limit of {self.max_columns}; "
                "select only the columns you need.",
            )
        return self.rows_fit(rows, columns)


@dataclass(frozen=True)
class WireColumn:
    """One result column as described before the run: name, database type name, clipping kind."""

    name: str
    type_name: str | None
    kind: Kind


@dataclass(frozen=True)
class ClipPlan:
    """The wrapped SQL and how to turn its wire rows back into the query's columns."""

    sql: str
    columns: tuple[WireColumn, ...]
    width: tuple[int, ...]  # wire columns per result column (1 or 2)
    merge: tuple[Callable[[Sequence[Any]], Any], ...]

    def reassemble(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """One wire row as the query's row."""
        out = []
        at = 0
        for width, merge in zip(self.width, self.merge, strict=True):
            out.append(merge(row[at : at + width]))
            at += width
        return tuple(out)


def keep(cells: Sequence[Any]) -> Any:
    """A column sent as is."""
    return cells[0]


def text_or_clipped(cells: Sequence[Any]) -> Any:
    """(value if it fit, clipped text if it did not)."""
    value, clipped = cells
    return Clipped(str(clipped)) if clipped is not None else value


def size_only(cells: Sequence[Any]) -> Any:
    """A binary column sent as its size."""
    return None if cells[0] is None else BinarySize(int(cells[0]))


MERGES: Final = {"keep": keep, "text_or_clipped": text_or_clipped, "size_only": size_only}


def text_chars(cell_bytes: int) -> int:
    """Characters of text that fit `cell_bytes` whatever the encoding (4 bytes a character at most)."""
    return max(1, cell_bytes // 4)


Describe = Callable[[Any, str, exp.Expr | None], list[WireColumn]]
"""(driver connection, sql, admission's parse of it or None) -> the result columns of `sql`."""
Wrap = Callable[[str, list[WireColumn], int, CellBudget], ClipPlan]


class StaleDescription(Exception):
    """A remembered description no longer matched and its query failed: run the call again."""


Run = Callable[[Any, str, int, CellBudget, Any, Sequence[str]], tuple[ClipPlan, list[Any], Any]]
"""(driver connection, sql, wire rows, budget, what an earlier call described or None, statements
to send first) -> (plan, wire rows, what this call described): begin, describe, wrap and run in
the fewest round trips."""


@dataclass(frozen=True)
class Clipping:
    """An engine's clipping in SQL (`Profile.clipping`): describe the columns, wrap the SQL, and
    where the driver can do it in fewer round trips, `run` all of it at once."""

    describe: Describe
    wrap: Wrap
    run: Run | None = None
