"""`profile_table`: what a table holds, at a bounded cost, without masked values.

    name --describe (readable tables only)--> columns, keys, row estimate
         --profile.table_stats (the identity's own session)--> what the database's statistics say
         --bounded sample queries through `SqlService.query`--> the rest

The statistics are read only where the identity may read the rows themselves (`pg_stats` shows a
column only with SELECT on it and without an active row-level policy; `sqlite_stat1` and index
cardinality hold counts, not values). Everything else comes from SQL this module writes with quoted
identifiers and sends through `SqlService.query`, the path of `execute_query`: admission, the row
cap, masking, cell clipping, the read-only session, the timeout, the audit note. Masked columns are
never read: the profile says only that they are masked. How the rows are read is `sampling`'s.

No query scans the table: PostgreSQL samples pages with `TABLESAMPLE SYSTEM`; elsewhere an integer
primary key is probed in random key ranges (an index range scan each); a table without one is read
up to a fixed number of rows in storage order (and the answer says so).
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from mcpkit.sql.analysis.sampling import (
    NEVER,
    SAMPLE_MAX,
    Calls,
    Source,
    Table,
    TableSample,
    masked_columns,
    sample_source,
    sample_table,
    table_stats,
)
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.masking import MaskRefused
from mcpkit.sql.profiles.base import ColumnStats
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
MCV_COUNT: Final = 5
MAX_COLUMNS: Final = 64
_VALUE_CHARS: Final = 80
_MCV_RESERVE_S: Final = 0.25

_NUMERIC = re.compile(
    r"\b(TINY|SMALL|MEDIUM|BIG)?INT(EGER)?\b|SERIAL|NUMERIC|DECIMAL|REAL|FLOAT|DOUBLE|MONEY"
)
_TEMPORAL = re.compile(r"DATE|TIME|YEAR|INTERVAL")
_TEXT = re.compile(r"CHAR|TEXT|CLOB|STRING|ENUM|NAME")
_GROUPABLE = re.compile(r"BOOL|UUID|BIT")


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


def _kind(type_text: str) -> str:
    upper = type_text.upper()
    if NEVER.search(upper):
        return "other"
    for name, pattern in (("number", _NUMERIC), ("time", _TEMPORAL), ("text", _TEXT)):
        if pattern.search(upper):
            return name
    return "group" if _GROUPABLE.search(upper) else "other"


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
    calls = Calls(service, call_id, note, deadline=started + service.timeout_s)
    with calls.step() as left:
        description, _ = service.describe(name, call_id=call_id, schema=schema, timeout_s=left)
    table = Table(description, service.engine.dialect)
    masked = masked_columns(service, description)
    stats = table_stats(calls, description)
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
        names = [p.name for p in wanted]
        source = sample_source(calls, table, names, estimate, PROFILE_ROWS, masked, hidden=stats.row_filtered)
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
            # Under row-level security the catalog's estimate counts hidden rows: nothing scales by it.
            scale = None if stats.row_filtered and not whole else estimate
            _scale_distinct(p, partial.get(p.name), sampled_rows, scale, whole)
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


def _aggregate(
    calls: Calls, table: Table, source: Source, columns: list[ColumnProfile], kinds: dict[str, str]
) -> int:
    row: list[list[Any]] = []
    # Masking may refuse MIN/MAX where equal values print differently (a SQLite column declared
    # COLLATE NOCASE, or of no type: 1 = 1.0, rth F4): then text bounds, then all bounds, are left out.
    for bounded in (("number", "time", "text"), ("number", "time"), ()):
        parts = ["COUNT(*)"]
        for p in columns:
            q = table.quote(p.name)
            kind = kinds[p.name]
            parts.append(f"COUNT({q})")
            parts.append(f"COUNT(DISTINCT {q})" if kind != "other" else "NULL")
            parts += [f"MIN({q})", f"MAX({q})"] if kind in bounded else ["NULL", "NULL"]
        try:
            row = calls.query(f"SELECT {', '.join(parts)} FROM ({source.sql}) AS s", 1).rows
            break
        except MaskRefused:
            if not bounded:
                raise
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
    calls: Calls, table: Table, source: Source, column: ColumnProfile, kind: str, total: int | None
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
