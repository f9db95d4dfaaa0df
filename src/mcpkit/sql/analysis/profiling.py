"""`profile_table` and `sample_table`: what a table holds, at a bounded cost, without masked values.

    name --describe (readable tables only)--> columns, keys, row estimate
         --profile.table_stats (the identity's own session)--> what the database's statistics say
         --bounded sample queries through `SqlService.query`--> the rest

The statistics are read only where the identity may read the rows themselves (`pg_stats` shows a
column only with SELECT on it and without an active row-level policy; `sqlite_stat1` and index
cardinality hold counts, not values). Everything else comes from SQL this module writes with quoted
identifiers and sends through `SqlService.query`, the path of `execute_query`: admission, the row
cap, masking, cell clipping, the read-only session, the timeout, the audit note. Masked columns are
never read: the profile says only that they are masked; a sample shows them as `<masked>`.

No query scans the table: PostgreSQL samples pages with `TABLESAMPLE SYSTEM`; elsewhere an integer
primary key is probed in random key ranges (an index range scan each); a table without one is read
up to a fixed number of rows in storage order (and the answer says so).
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
from mcpkit.sql.models import QueryResult, TableDescription
from mcpkit.sql.profiles.base import ColumnStats, TableStats
from mcpkit.sql.service import Note, SqlService
from mcpkit.sql.shaping import clip, shape_cell

__all__ = [
    "PROFILE_ROWS",
    "SAMPLE_MAX",
    "ColumnProfile",
    "TableProfile",
    "TableSample",
    "ValueCount",
    "profile_table",
    "sample_table",
]

PROFILE_ROWS: Final = 10_000
"""Rows at most that a profile's bounded queries read."""
SAMPLE_MAX: Final = 100
"""The most rows `sample_table` returns."""
MCV_COUNT: Final = 5
MAX_COLUMNS: Final = 64
_VALUE_CHARS: Final = 80
_WINDOWS: Final = 20
_MCV_RESERVE_S: Final = 0.25
_ROW_SAMPLED: Final = 100_000
"""Tables up to this many rows are sampled row by row (a scan that small is cheap)."""
_FEW_ROW_SAMPLED: Final = 2_000_000
"""The same for `sample_table`, whose few rows page sampling would take from a few pages."""
_ROWS_PER_PAGE: Final = 100
_RNG: Final = random.SystemRandom()

_NUMERIC = re.compile(
    r"\b(TINY|SMALL|MEDIUM|BIG)?INT(EGER)?\b|SERIAL|NUMERIC|DECIMAL|REAL|FLOAT|DOUBLE|MONEY"
)
_TEMPORAL = re.compile(r"DATE|TIME|YEAR|INTERVAL")
_TEXT = re.compile(r"CHAR|TEXT|CLOB|STRING|ENUM|NAME")
_GROUPABLE = re.compile(r"BOOL|UUID|BIT")
_NEVER = re.compile(r"\[\]|ARRAY|JSON|BLOB|BYTEA|BINARY|VECTOR|GEOMETRY|POINT|XML|RANGE")


class ValueCount(BaseModel):
    """A frequent value and the fraction of rows that hold it."""

    model_config = ConfigDict(extra="forbid")

    value: JsonValue
    fraction: float


class ColumnProfile(BaseModel):
    """One column: what the statistics or a bounded sample say of it; masked columns say nothing."""

    model_config = ConfigDict(extra="forbid")

    name: str
    type: str
    status: str = Field(description="profiled, masked (values withheld) or not readable by this account")
    source: str | None = Field(default=None, description="statistics (the database's own) or sample")
    null_fraction: float | None = None
    distinct_estimate: int | None = Field(
        default=None, description="Distinct values in the table (statistics, or the sample's scaled)."
    )
    min: JsonValue = None
    max: JsonValue = None
    most_common: list[ValueCount] = Field(default_factory=list)


class TableProfile(BaseModel):
    """The profile of one table or view."""

    model_config = ConfigDict(extra="forbid")

    table_schema: str | None
    name: str
    row_estimate: int | None = Field(description="The database's estimate, where it has one.")
    statistics: str = Field(description="Which of the database's statistics were used (empty: none).")
    sampling: str = Field(description="How the sampled figures were read.")
    sampled_rows: int | None = Field(description="Rows the sample held (None: no sample was needed).")
    columns: list[ColumnProfile]
    more_columns: int = Field(default=0, description=f"Columns past the first {MAX_COLUMNS}, not profiled.")
    unfinished: list[str] = Field(
        default_factory=list,
        description="Columns whose most common values were not read: the call's time ran out first.",
    )
    elapsed_ms: float


class TableSample(BaseModel):
    """A few rows of one table, chosen at random where the database allows it without a scan."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str]
    rows: list[list[JsonValue]]
    row_count: int
    sampling: str = Field(description="How the rows were chosen.")
    elapsed_ms: float


@dataclass
class _Calls:
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
        """Seconds left for the next step (`QueryTimeout` when none are)."""
        left = self.remaining()
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


def _kind(type_text: str) -> str:
    upper = type_text.upper()
    if _NEVER.search(upper):
        return "other"
    for name, pattern in (("number", _NUMERIC), ("time", _TEMPORAL), ("text", _TEXT)):
        if pattern.search(upper):
            return name
    return "group" if _GROUPABLE.search(upper) else "other"


@dataclass(frozen=True)
class _Table:
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
        if column is None or not re.search(r"INT", column.type.upper()) or _NEVER.search(column.type.upper()):
            return None
        return column.name


@dataclass(frozen=True)
class _Source:
    """The rows to read (`FROM ... [TABLESAMPLE ...] [WHERE ...] LIMIT n`) and how they were chosen."""

    table: _Table
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


def _sample_source(
    calls: _Calls,
    table: _Table,
    columns: Sequence[str],
    estimate: int | None,
    wanted: int,
    masked: frozenset[str],
    windows: int = _WINDOWS,
    boost: float = 1.0,
    few: bool = False,
) -> _Source:
    """SQL for at most `wanted` rows of the table's `columns`, read without a scan.

    Page sampling suits a profile (many rows, a few hundred pages); a handful of rows is better
    spread by key ranges (`few`), where page sampling would return neighbours.
    """
    cols = tuple(columns)
    limit = f"LIMIT {wanted}"
    if estimate is not None and estimate <= wanted:
        return _Source(table, limit, cols, "whole table", whole=True)
    tried = (_by_keys, _by_pages) if few else (_by_pages, _by_keys)
    for way in tried:
        found = way(calls, table, cols, estimate, wanted, masked, windows, boost, few)
        if found is not None:
            return found
    return _Source(table, limit, cols, f"the first {wanted} rows in storage order (no sampling method)")


def _by_pages(
    calls: _Calls,
    table: _Table,
    cols: tuple[str, ...],
    estimate: int | None,
    wanted: int,
    masked: frozenset[str],
    windows: int,
    boost: float,
    few: bool,
) -> _Source | None:
    profile = calls.service.profile
    if profile.sample_clause(1.0, 1) is None or not estimate or table.description.kind != "table":
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
    return _Source(
        table, f"{clause} LIMIT {rows}", cols, f"TABLESAMPLE ({percent:.4g}% of {what})", rows=rows
    )


def _by_keys(
    calls: _Calls,
    table: _Table,
    cols: tuple[str, ...],
    estimate: int | None,
    wanted: int,
    masked: frozenset[str],
    windows: int,
    boost: float,
    few: bool,
) -> _Source | None:
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
        return _Source(table, f"LIMIT {wanted}", cols, "whole table", whole=True)
    starts = sorted(_RNG.randrange(low, high - width + 2) for _ in range(windows))
    ranges = " OR ".join(f"{q} BETWEEN {s} AND {s + width - 1}" for s in starts)
    return _Source(table, f"WHERE {ranges} LIMIT {wanted}", cols, f"{windows} random key ranges of {key}")


def _scale_distinct(
    column: ColumnProfile, stats: ColumnStats | None, sampled: int, estimate: int | None, whole: bool
) -> None:
    """The table's distinct estimate: exact when the sample was the whole table; else the
    statistics' where they have one; else the sample's count when it repeats values, or scaled to
    the table's non-null rows when the sample's values are (nearly) all distinct."""
    if whole:
        return  # counted over every row: exact
    if stats is not None and stats.distinct is not None:
        column.distinct_estimate = round(stats.distinct)
        return
    seen = column.distinct_estimate
    if seen is None or not sampled or estimate is None or column.null_fraction is None:
        return
    present = sampled * (1 - column.null_fraction)
    if present and seen >= 0.9 * present:
        column.distinct_estimate = max(seen, round(estimate * (1 - column.null_fraction) * seen / present))


def _count(value: JsonValue) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _value(value: Any) -> JsonValue:
    shaped = shape_cell(value)
    return clip(shaped, _VALUE_CHARS) if isinstance(shaped, str) else shaped


def _from_stats(column: ColumnProfile, stats: ColumnStats, kind: str) -> None:
    column.source = "statistics"
    column.null_fraction = stats.null_fraction
    column.distinct_estimate = round(stats.distinct) if stats.distinct is not None else None
    if kind in ("number", "time", "text"):
        column.min, column.max = _value(stats.minimum), _value(stats.maximum)
    column.most_common = [
        ValueCount(value=_value(v), fraction=round(f, 4)) for v, f in stats.common[:MCV_COUNT]
    ]


def profile_table(
    service: SqlService,
    name: str,
    *,
    call_id: str,
    schema: str | None = None,
    note: Note | None = None,
) -> TableProfile:
    """Profile one readable table: per column its type, null fraction, distinct estimate, bounds and
    most common values, from the database's statistics where the identity may read them and from
    at most `PROFILE_ROWS` sampled rows where not.

    Raises:
        Refused: no readable table has that name (`not_found`), or admission refused a query.
        QueryFailed, QueryTimeout: as `execute_query`.
    """
    started = time.perf_counter()
    calls = _Calls(service, call_id, note, deadline=started + service.timeout_s)
    with calls.step() as left:
        description, _ = service.describe(name, call_id=call_id, schema=schema, timeout_s=left)
    table = _Table(description, service.engine.dialect)
    masked = _masked(service, description)
    stats = _stats(calls, description)
    readable = stats.readable
    profiles: list[ColumnProfile] = []
    kinds: dict[str, str] = {}
    for column in description.columns[:MAX_COLUMNS]:
        status = "masked" if column.name in masked else "profiled"
        if status == "profiled" and readable is not None and column.name not in readable:
            status = "not readable"
        profiles.append(ColumnProfile(name=column.name, type=column.type, status=status))
        kinds[column.name] = _kind(column.type)
    estimate = stats.rows if stats.rows is not None else description.row_estimate
    # Statistics with a null fraction describe the whole column (pg_stats); others only help.
    complete = {n: c for n, c in stats.columns.items() if c.null_fraction is not None}
    for p in profiles:
        if p.status == "profiled" and p.name in complete:
            _from_stats(p, complete[p.name], kinds[p.name])
    wanted = [p for p in profiles if p.status == "profiled" and p.source is None]
    partial = {n: c for n, c in stats.columns.items() if n not in complete}
    unfinished: list[str] = []
    sampled_rows: int | None = None
    whole = False
    method = "none needed: the statistics cover every column"
    if wanted:
        source = _sample_source(calls, table, [p.name for p in wanted], estimate, PROFILE_ROWS, masked)
        method = source.method
        sampled_rows = _aggregate(calls, table, source, wanted, kinds)
        whole = source.whole and sampled_rows < PROFILE_ROWS
        if whole:
            estimate = sampled_rows
        for p in wanted:
            # Out of time: what is done is answered, and the answer names what is not.
            if unfinished or calls.remaining() <= _MCV_RESERVE_S:
                unfinished.append(p.name)
            else:
                try:
                    _common(calls, table, source, p, kinds[p.name], sampled_rows)
                except QueryTimeout:
                    unfinished.append(p.name)
            _scale_distinct(p, partial.get(p.name), sampled_rows, estimate, whole)
    shown = estimate if whole or not stats.row_filtered else None  # the catalog counts hidden rows
    return TableProfile(
        table_schema=description.table_schema,
        name=description.name,
        row_estimate=shown,
        statistics=stats.source,
        sampling=method,
        sampled_rows=sampled_rows,
        columns=profiles,
        more_columns=max(0, len(description.columns) - MAX_COLUMNS),
        unfinished=unfinished,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
    )


def _masked(service: SqlService, description: TableDescription) -> frozenset[str]:
    if service.masking is None:
        return frozenset()
    names = [c.name for c in description.columns]
    return service.masking.policy.masked_columns(description.table_schema, description.name, names)


def _stats(calls: _Calls, description: TableDescription) -> TableStats:
    service = calls.service
    engine = service.engine
    if not isinstance(engine, SqlEngine):
        return TableStats()
    with calls.step() as left, engine.session(left, calls.call_id) as (conn, _):
        found = engine.profile.table_stats(conn, description.table_schema, description.name)
    masked = _masked(service, description)
    # Statistics of masked columns are values too (bounds, common values, counts): dropped here.
    kept = {n: s for n, s in found.columns.items() if n not in masked}
    return TableStats(found.rows, kept, found.readable, found.source, found.row_filtered)


def _aggregate(
    calls: _Calls, table: _Table, source: _Source, columns: list[ColumnProfile], kinds: dict[str, str]
) -> int:
    parts = ["COUNT(*)"]
    for p in columns:
        q = table.quote(p.name)
        kind = kinds[p.name]
        parts.append(f"COUNT({q})")
        parts.append(f"COUNT(DISTINCT {q})" if kind != "other" else "NULL")
        if kind in ("number", "time", "text"):
            parts += [f"MIN({q})", f"MAX({q})"]
        else:
            parts += ["NULL", "NULL"]
    row = calls.query(f"SELECT {', '.join(parts)} FROM ({source.sql}) AS s", 1).rows
    cells = row[0] if row else [0] * len(parts)
    total = _count(cells[0])
    for i, p in enumerate(columns):
        present, distinct, low, high = cells[1 + 4 * i : 5 + 4 * i]
        p.source = "sample"
        p.null_fraction = round(1 - _count(present) / total, 4) if total else None
        if distinct is not None:
            p.distinct_estimate = _count(distinct)
        p.min, p.max = _value(low), _value(high)
    return total


def _common(
    calls: _Calls, table: _Table, source: _Source, column: ColumnProfile, kind: str, total: int | None
) -> None:
    if kind == "other" or not total:
        return
    present = total * (1 - (column.null_fraction or 0.0))
    if column.distinct_estimate is not None and column.distinct_estimate >= 0.5 * present:
        return  # mostly distinct in the sample: no value is common enough to tell
    q = table.quote(column.name)
    result = calls.query(
        f"SELECT {q}, COUNT(*) AS n FROM ({source.of([column.name])}) AS s WHERE {q} IS NOT NULL"
        f" GROUP BY {q} ORDER BY n DESC, {q} LIMIT {MCV_COUNT}",
        MCV_COUNT,
    )
    column.most_common = [
        ValueCount(value=_value(v), fraction=round(_count(n) / total, 4))
        for v, n in result.rows
        if _count(n) > 1
    ]


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
    calls = _Calls(service, call_id, note, deadline=started + service.timeout_s)
    with calls.step() as left:
        description, _ = service.describe(name, call_id=call_id, schema=schema, timeout_s=left)
    table = _Table(description, service.engine.dialect)
    masked = _masked(service, description)
    stats = _stats(calls, description)
    estimate = description.row_estimate if description.row_estimate is not None else stats.rows
    n = max(1, min(rows, SAMPLE_MAX, service.max_rows))
    fetch = min(2 * n, service.max_rows)
    readable = stats.readable
    columns = [
        c.name for c in description.columns if readable is None or c.name in readable or c.name in masked
    ]
    windows = min(fetch, 100)
    source = _sample_source(calls, table, columns, estimate, fetch, masked, windows, few=True)
    result = calls.query(source.sql, max(fetch, source.rows))
    if result.row_count < n and not source.whole and (estimate or 0) > n:
        # Too few rows came back (sparse keys, an unlucky draw of pages): once more, wider.
        source = _sample_source(calls, table, columns, estimate, fetch, masked, windows, boost=8.0, few=True)
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
