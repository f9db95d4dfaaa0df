"""Where the scan order may follow a masked column: start-up warnings, not refusals.

An index (a primary key, a UNIQUE email index, a covering index) or the physical layout can make
the engine return rows in the order of a masked column's values. The masking analysis pins every
order it can see, but some answers stay order-dependent (EXISTS that stops at the first match with
a row-dependent error, floating-point sums): they can reveal the ranking of the masked values,
never the values. These hints tell the operator where that is possible (docs/masking.md). A
partition key over a masked column is a refusal instead (`partition_finding`: no pin reorders it).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.findings import Finding

__all__ = [
    "PARTITIONS_REVEAL",
    "IndexReach",
    "ScanPin",
    "hint",
    "index_hints",
    "partition_finding",
    "pin_key",
    "reads_no_mask",
    "split_key",
    "unmasked_call",
]

log = logging.getLogger("mcpkit.sql")


@dataclass(frozen=True)
class ScanPin:
    """How one masked table is read.

    Attributes:
        indexes: The indexes whose columns are all visible (MySQL/MariaDB `USE INDEX`; empty:
            `USE INDEX ()`, a scan in the clustered key's order).
        not_indexed: SQLite: `NOT INDEXED` (rowid order) instead of an index list.
        hinted: Whether references get the hint; False for an entry that only describes a relation
            (a view, or a table with `exact` columns).
        follows: A view whose read may follow a masked column: no hint reaches inside it
            (`masking.unpinned`, red team rth F5).
        exact: Its columns (case-folded) whose equal values are byte-equal (MariaDB: binary
            strings, `*_nopad_bin`), whose stored spelling is data whatever the scan order.
    """

    indexes: tuple[str, ...] = ()
    not_indexed: bool = False
    hinted: bool = True
    follows: bool = False
    exact: frozenset[str] = frozenset()


@dataclass(frozen=True)
class IndexReach:
    """What a query must reach for its read order to follow a masked index (PostgreSQL, whose calls
    then turn index scans off: `profiles.postgres.index_reach`).

    Attributes:
        relations: `pin_key`s of the relations whose reading may scan an index over a masked column:
            the inheritance tree of a masked table with one, the views and policies over them.
        functions: Casefolded names of user functions (their bodies are not resolved): a call of one
            may read such a relation.
        always: Every masked call may (a user operator or cast, a masked table not found).
    """

    relations: frozenset[str] = frozenset()
    functions: frozenset[str] = frozenset()
    always: bool = False


def pin_key(schema: str | None, table: str) -> str:
    """The key of `KnownSchema.scan_pins`: `schema.table` casefolded (`.table` with one namespace).

    >>> pin_key("Shop", "Customers")
    'shop.customers'
    """
    return f"{schema or ''}.{table}".casefold()


_UNMASKED = threading.local()


@contextmanager
def unmasked_call(on: bool) -> Iterator[None]:
    """Mark this thread's database call as one whose query reads no masked table (`NO_MASKING`):
    a profile may then leave out what it does to keep reads off masked columns (PostgreSQL's index
    scans off). Unmarked calls (sampling, profiling, re-verification) keep it."""
    before = getattr(_UNMASKED, "on", False)
    _UNMASKED.on = on
    try:
        yield
    finally:
        _UNMASKED.on = before


def reads_no_mask() -> bool:
    """Whether the current call is marked by `unmasked_call(True)`."""
    return bool(getattr(_UNMASKED, "on", False))


PARTITIONS_REVEAL: Final = (
    "(also by how long a failing one takes) which partition each row is in, so the bound its value"
    " falls in (LIST: the value itself; RANGE, HASH: a bucket of it); do not partition by a masked column"
)
"""What a partition key over a masked column hands the order-dependent answers (red team rtK F3)."""


def hint(table: str, column: str, why: str, reveals: str = "the ranking of its values") -> str:
    """One warning line."""
    return (
        f"scan order may follow masked column {table}.{column} ({why}): order-dependent answers "
        f"can reveal {reveals}; see docs/masking.md"
    )


def split_key(key: str) -> tuple[str | None, str]:
    """`schema.table` or `table` -> (schema, table)."""
    schema, _, table = key.rpartition(".")
    return (schema or None), table


def index_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """Primary keys, unique constraints and indexes (key or INCLUDE columns) over a masked column."""
    inspector = inspect(conn)
    out: list[str] = []
    for key, columns in sorted(masked.items()):
        schema, table = split_key(key)
        wanted = {c.casefold() for c in columns}
        found: list[tuple[str, str]] = []
        try:
            with warnings.catch_warnings():  # a profile names those (SQLite: expression_index_hints)
                warnings.filterwarnings("ignore", "Skipped unsupported reflection of expression-based index")
                pk = inspector.get_pk_constraint(table, schema=schema)
                indexes = inspector.get_indexes(table, schema=schema)
                uniques = inspector.get_unique_constraints(table, schema=schema)
        except Exception as exc:  # a hint, never a reason not to start
            log.info("scan-order hints: cannot inspect %s: %s", key, type(exc).__name__)
            continue
        for col in pk.get("constrained_columns") or []:
            found.append((col, "primary key"))
        described: list[Mapping[str, Any]] = [*indexes, *uniques]
        for index in described:
            names = [str(c) for c in index.get("column_names") or [] if c]
            names += list(index.get("include_columns") or [])
            names += list((index.get("dialect_options") or {}).get("postgresql_include") or [])
            found += [(c, f"index {index.get('name') or '?'}") for c in names]
        seen: set[tuple[str, str]] = set()
        for col, why in found:
            if col.casefold() in wanted and (col.casefold(), why) not in seen:
                seen.add((col.casefold(), why))
                out.append(hint(key, col, why))
    return out


def partition_finding(table: str, column: str, key: str) -> Finding:
    """A table partitioned by `key`, which reads masked column `column`."""
    return Finding(
        "partitioned-masked",
        f"table {table} is partitioned by {key} over masked column {column}: its partitions are scanned "
        "in bound order, so order-dependent answers (early stops, picks) tell " + PARTITIONS_REVEAL,
        f"re-partition {table} by visible columns only (or leave {column} unmasked)",
        f"partition-order:{table}",
    )
