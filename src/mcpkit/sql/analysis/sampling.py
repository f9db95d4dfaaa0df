"""How the analyst tools read a table within one budget, and `sample_table`.

    Calls: every step on what is left of the call's one deadline, each statement noted for the audit
    Table: a located table, its names quoted for SQL
    sample_source: at most n rows without a scan (PostgreSQL `TABLESAMPLE`, random ranges of an
        integer primary key elsewhere, else the first rows in storage order, and the answer says so)

Every query goes through `SqlService.query`, the path of `execute_query`: admission, the row cap,
masking, cell clipping, the read-only session, the timeout, the audit note. A sample shows masked
columns as `<masked>`.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlglot import exp

from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.models import QueryResult, Row, TableDescription
from mcpkit.sql.profiles.base import TableStats
from mcpkit.sql.service import Note, SqlService

__all__ = [
    "NEVER",
    "SAMPLE_MAX",
    "Calls",
    "Source",
    "Table",
    "TableSample",
    "masked_columns",
    "sample_source",
    "sample_table",
    "table_stats",
]

SAMPLE_MAX: Final = 100
"""The most rows `sample_table` returns."""
NEVER: Final = re.compile(r"\[\]|ARRAY|JSON|BLOB|BYTEA|BINARY|VECTOR|GEOMETRY|POINT|XML|RANGE")
"""Column types no aggregate or key range reads."""
_WINDOWS: Final = 20
_ROW_SAMPLED: Final = 100_000
"""Tables up to this many rows are sampled row by row (a scan that small is cheap)."""
_FEW_ROW_SAMPLED: Final = 2_000_000
"""The same for `sample_table`, whose few rows page sampling would take from a few pages."""
_ROWS_PER_PAGE: Final = 100
_SETTLE_S: Final = 0.1
"""At most this much of a call's budget is kept for cancelling and closing a stopped statement."""
_RNG: Final = random.SystemRandom()


class TableSample(BaseModel):
    """A few rows of one table, chosen at random where the database allows it without a scan."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    rows: list[Row]
    row_count: int
    sampling: str = Field(description="How the rows were chosen.")
    elapsed_ms: float


@dataclass
class Calls:
    """Runs this tool's queries through `service.query` within one deadline (the service's timeout
    for the whole call), noting every statement for the audit."""

    service: SqlService
    call_id: str
    note: Note | None
    deadline: float = 0.0
    sent: list[str] = field(default_factory=list)
    rows: int = 0

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = time.perf_counter() + self.service.timeout_s

    def remaining(self) -> float:
        """Seconds left of the call's budget."""
        return self.deadline - time.perf_counter()

    def left(self) -> float:
        """Seconds left for the next step (`QueryTimeout` when none are), less the time a stopped
        statement takes to be cleaned up, so that the call as a whole ends by its deadline."""
        left = self.remaining() - min(_SETTLE_S, 0.05 * self.service.timeout_s)
        if left <= 0:
            raise QueryTimeout(self.service.timeout_s, self.call_id)
        return left

    @contextmanager
    def step(self) -> Iterator[float]:
        """One step on what is left of the budget; its timeout is told as the call's, not the
        step's remainder (the caller knows the service's timeout, not this tool's steps)."""
        try:
            yield self.left()
        except QueryTimeout:
            raise QueryTimeout(self.service.timeout_s, self.call_id) from None

    def _noted(self, **fields: Any) -> None:
        if "sql" in fields:
            self.sent.append(str(fields["sql"]))
        if "rows" in fields:
            self.rows += int(fields["rows"])

    def query(self, sql: str, rows: int) -> QueryResult:
        with self.step() as left:
            result, _ = self.service.query(
                sql, call_id=self.call_id, max_rows=rows, note=self._noted, timeout_s=left
            )
        if self.note is not None:
            self.note(sql=";\n".join(self.sent), rows=self.rows, truncated=False)
        return result


@dataclass(frozen=True)
class Table:
    """A located table: quoted names for SQL, its columns and keys, its row estimate."""

    description: TableDescription
    dialect: str

    def quote(self, name: str) -> str:
        return exp.to_identifier(name, quoted=True).sql(dialect=sent_dialect(self.dialect))

    @property
    def ref(self) -> str:
        d = self.description
        name = self.quote(d.name)
        return f"{self.quote(d.table_schema)}.{name}" if d.table_schema else name

    def integer_key(self, masked: frozenset[str]) -> str | None:
        d = self.description
        if d.kind != "table" or len(d.primary_key) != 1 or d.primary_key[0] in masked:
            return None
        column = next((c for c in d.columns if c.name == d.primary_key[0]), None)
        if column is None or not re.search(r"INT", column.type.upper()) or NEVER.search(column.type.upper()):
            return None
        return column.name


@dataclass(frozen=True)
class Source:
    """The rows to read (`FROM ... [TABLESAMPLE ...] [WHERE ...] LIMIT n`) and how they were chosen."""

    table: Table
    tail: str
    columns: tuple[str, ...]
    method: str
    whole: bool = False
    rows: int = 0
    """Rows the source may return, when more than asked for (0: as asked)."""

    @property
    def sql(self) -> str:
        return self.of(self.columns)

    def of(self, columns: Sequence[str]) -> str:
        """The same rows, with only these columns."""
        select = ", ".join(self.table.quote(c) for c in columns) or "1 AS one"
        return f"SELECT {select} FROM {self.table.ref} {self.tail}"


def sample_source(
    calls: Calls,
    table: Table,
    columns: Sequence[str],
    estimate: int | None,
    wanted: int,
    masked: frozenset[str],
    windows: int = _WINDOWS,
    boost: float = 1.0,
    few: bool = False,
    hidden: bool = False,
) -> Source:
    """SQL for at most `wanted` rows of the table's `columns`, read without a scan.

    Page sampling suits a profile (many rows, a few hundred pages); a handful of rows is better
    spread by key ranges (`few`), where page sampling would return neighbours. `hidden`: row-level
    security hides rows the estimate counts, so the method shown carries no figure computed from it.
    """
    cols = tuple(columns)
    limit = f"LIMIT {wanted}"
    if estimate is not None and estimate <= wanted:
        return Source(table, limit, cols, "whole table", whole=True)
    tried = (_by_keys, _by_pages) if few else (_by_pages, _by_keys)
    for way in tried:
        found = way(calls, table, cols, estimate, wanted, masked, windows, boost, few, hidden)
        if found is not None:
            return found
    if masked or (calls.service.masking is not None and table.description.kind != "table"):
        # masking orders a read of a masked table or a view by its visible values
        return Source(
            table, limit, cols, f"the first {wanted} rows by their visible values (no sampling method)"
        )
    return Source(table, limit, cols, f"the first {wanted} rows in storage order (no sampling method)")


def _by_pages(
    calls: Calls,
    table: Table,
    cols: tuple[str, ...],
    estimate: int | None,
    wanted: int,
    masked: frozenset[str],
    windows: int,
    boost: float,
    few: bool,
    hidden: bool,
) -> Source | None:
    profile = calls.service.profile
    if profile.sample_clause(1.0, 1) is None or not estimate or table.description.kind != "table":
        return None
    if masked:
        # The rows a TABLESAMPLE keeps follow the storage layout, which an index or CLUSTER on a
        # masked column can set (masking refuses TABLESAMPLE over a masked read): key ranges.
        return None
    # Pages for large tables (no scan); rows for small ones, where a page holds much of the table.
    # A few rows are drawn row by row up to a larger table, and from pages beyond it: about one
    # page per row wanted, all of their rows read (up to the row cap) for the caller to pick from.
    pages = estimate > (_FEW_ROW_SAMPLED if few else _ROW_SAMPLED)
    target = wanted * (_ROWS_PER_PAGE if few and pages else 1.5)
    percent = min(100.0, max(0.0001, 100.0 * target * boost / estimate))
    clause = profile.sample_clause(percent, _RNG.randrange(1, 2**31 - 1), pages=pages)
    what = "pages" if pages else "rows"
    rows = calls.service.max_rows if few and pages else wanted
    share = "a fraction" if hidden else f"{percent:.4g}%"  # the percentage would give the estimate away
    return Source(table, f"{clause} LIMIT {rows}", cols, f"TABLESAMPLE ({share} of {what})", rows=rows)


def _by_keys(
    calls: Calls,
    table: Table,
    cols: tuple[str, ...],
    estimate: int | None,
    wanted: int,
    masked: frozenset[str],
    windows: int,
    boost: float,
    few: bool,
    hidden: bool,  # nothing here is computed from the estimate
) -> Source | None:
    key = table.integer_key(masked)
    if key is None:
        return None
    q = table.quote(key)
    # Two scalar subqueries: SQLite answers MIN or MAX from the key's b-tree only when it is alone.
    bounds = calls.query(
        f"SELECT (SELECT MIN({q}) FROM {table.ref}), (SELECT MAX({q}) FROM {table.ref})", 1
    ).rows
    low, high = (bounds[0] if bounds else (None, None))[:2]
    if not isinstance(low, int) or not isinstance(high, int):
        return None
    span = high - low + 1
    density = min(1.0, estimate / span) if estimate else 1.0
    width = max(1, math.ceil(wanted * boost / windows / density))
    if width * windows >= span:
        return Source(table, f"LIMIT {wanted}", cols, "whole table", whole=True)
    starts = sorted(_RNG.randrange(low, high - width + 2) for _ in range(windows))
    ranges = " OR ".join(f"{q} BETWEEN {s} AND {s + width - 1}" for s in starts)
    return Source(table, f"WHERE {ranges} LIMIT {wanted}", cols, f"{windows} random key ranges of {key}")


def masked_columns(service: SqlService, description: TableDescription) -> frozenset[str]:
    """The table's columns the service's mask policy withholds."""
    if service.masking is None:
        return frozenset()
    names = [c.name for c in description.columns]
    return service.masking.policy.masked_columns(description.table_schema, description.name, names)


def table_stats(calls: Calls, description: TableDescription) -> TableStats:
    """The database's statistics of the table as the calls' identity may read them, without
    those of masked columns, read on what is left of the call's budget."""
    service = calls.service
    engine = service.engine
    if not isinstance(engine, SqlEngine):
        return TableStats()
    with calls.step() as left, engine.session(left, calls.call_id) as (conn, _):
        found = engine.profile.table_stats(conn, description.table_schema, description.name)
    masked = masked_columns(service, description)
    # Statistics of masked columns are values too (bounds, common values, counts): dropped here.
    kept = {n: s for n, s in found.columns.items() if n not in masked}
    return TableStats(found.rows, kept, found.readable, found.source, found.row_filtered)


def sample_table(
    service: SqlService,
    name: str,
    *,
    call_id: str,
    rows: int = 10,
    schema: str | None = None,
    note: Note | None = None,
    pick: Callable[[list[list[JsonValue]], int], list[list[JsonValue]]] | None = None,
) -> TableSample:
    """A few random rows of one readable table, masked columns as `<masked>`, without a full scan.

    Args:
        service: The caller's service (identity, masking, limits).
        name: The table, as list_tables shows it.
        call_id: The call.
        rows: How many rows (at most `SAMPLE_MAX` and the service's row cap).
        schema: Its schema, when names repeat.
        note: The audit's note.
        pick: Chooses `rows` of the rows read (default: uniformly at random).

    Raises:
        Refused: no readable table has that name (`not_found`), or admission refused the query.
    """
    started = time.perf_counter()
    calls = Calls(service, call_id, note, deadline=started + service.timeout_s)
    with calls.step() as left:
        description, _ = service.describe(name, call_id=call_id, schema=schema, timeout_s=left)
    table = Table(description, service.engine.dialect)
    masked = masked_columns(service, description)
    stats = table_stats(calls, description)
    estimate = description.row_estimate if description.row_estimate is not None else stats.rows
    n = max(1, min(rows, SAMPLE_MAX, service.max_rows))
    fetch = min(2 * n, service.max_rows)
    readable = stats.readable
    columns = [
        c.name for c in description.columns if readable is None or c.name in readable or c.name in masked
    ]
    windows = min(fetch, 100)
    hidden = stats.row_filtered
    source = sample_source(calls, table, columns, estimate, fetch, masked, windows, few=True, hidden=hidden)
    result = calls.query(source.sql, max(fetch, source.rows))
    if result.row_count < n and not source.whole and (estimate or 0) > n:
        # Too few rows came back (sparse keys, an unlucky draw of pages): once more, wider.
        source = sample_source(
            calls, table, columns, estimate, fetch, masked, windows, boost=8.0, few=True, hidden=hidden
        )
        result = calls.query(source.sql, max(fetch, source.rows))
    chosen = (pick or _pick)(list(result.rows), n)
    return TableSample(
        columns=list(result.columns),
        rows=chosen,
        row_count=len(chosen),
        sampling=source.method,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
    )


def _pick(rows: list[list[JsonValue]], n: int) -> list[list[JsonValue]]:
    return rows if len(rows) <= n else _RNG.sample(rows, n)
