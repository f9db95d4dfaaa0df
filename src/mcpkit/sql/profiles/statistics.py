"""What a database's own statistics say of a table and its columns, as a profile reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ColumnStats", "TableStats"]


@dataclass(frozen=True)
class ColumnStats:
    """What the database's own statistics say of one column (None: they do not say).

    Values are as the catalog holds them (often text); `common` pairs a value with its fraction.
    """

    null_fraction: float | None = None
    distinct: float | None = None
    minimum: Any = None
    maximum: Any = None
    common: tuple[tuple[Any, float], ...] = ()


@dataclass(frozen=True)
class TableStats:
    """The statistics the calls' identity may read for one table.

    Attributes:
        rows: The row estimate, where the statistics hold one.
        columns: Column name -> its statistics, only for columns the identity may read in full.
        readable: The columns the identity may select (None: every column the reflection shows).
        source: What the statistics came from, for the answer (e.g. `pg_stats`).
        row_filtered: Row-level security hides rows from the identity: whole-table counts (such
            as the catalog's row estimate) are not its to see.
    """

    rows: int | None = None
    columns: Mapping[str, ColumnStats] = field(default_factory=dict)
    readable: frozenset[str] | None = None
    source: str = ""
    row_filtered: bool = False
