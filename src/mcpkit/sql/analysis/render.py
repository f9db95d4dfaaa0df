"""The text the model reads for `profile_table` and `sample_table`: one line, then a markdown table."""

from __future__ import annotations

from pydantic import JsonValue

from mcpkit.sql.analysis.profiling import TableProfile, TableSample
from mcpkit.sql.models import QueryResult
from mcpkit.sql.render import escape_cell, render_markdown

__all__ = ["render_profile", "render_sample"]


def _cell(value: JsonValue) -> JsonValue:
    return "" if value is None else value


def render_profile(profile: TableProfile) -> str:
    """A profile as markdown: the table, its row estimate and how it was read, then one row per column."""
    where = f"{profile.table_schema}.{profile.name}" if profile.table_schema else profile.name
    rows = "?" if profile.row_estimate is None else f"about {profile.row_estimate}"
    head = escape_cell(
        f"{where}: {rows} rows; statistics: {profile.statistics or 'none'}; sample: {profile.sampling}"
        + (f" ({profile.sampled_rows} rows)" if profile.sampled_rows is not None else "")
        + f"; {profile.elapsed_ms:g} ms"
        + (
            f"; most common values not read, out of time: {', '.join(profile.unfinished)}"
            if profile.unfinished
            else ""
        )
    )
    body: list[list[JsonValue]] = []
    for c in profile.columns:
        common = ", ".join(
            f"{'NULL' if v.value is None else v.value} ({v.fraction:.0%})" for v in c.most_common
        )
        if c.status != "profiled":
            body.append([c.name, c.type, c.status, "", "", "", "", ""])
            continue
        nulls = "" if c.null_fraction is None else f"{c.null_fraction:.1%}"
        body.append(
            [
                c.name,
                c.type,
                c.source or "",
                nulls,
                _cell(c.distinct_estimate),
                _cell(c.min),
                _cell(c.max),
                common,
            ]
        )
    table = QueryResult(
        columns=["column", "type", "from", "nulls", "distinct", "min", "max", "most common"],
        rows=body,
        row_count=len(body),
        truncated=False,
        elapsed_ms=profile.elapsed_ms,
    )
    tail = f"\n({profile.more_columns} more columns not profiled)" if profile.more_columns else ""
    return head + "\n" + render_markdown(table).split("\n", 1)[1] + tail


def render_sample(sample: TableSample) -> str:
    """A sample as markdown: how the rows were chosen, then the rows."""
    result = QueryResult(
        columns=sample.columns,
        rows=sample.rows,
        row_count=sample.row_count,
        truncated=False,
        elapsed_ms=sample.elapsed_ms,
    )
    n = sample.row_count
    head = escape_cell(
        f"{n} sampled row{'' if n == 1 else 's'} ({sample.sampling}); {sample.elapsed_ms:g} ms"
    )
    return head + "\n" + render_markdown(result).split("\n", 1)[1]
