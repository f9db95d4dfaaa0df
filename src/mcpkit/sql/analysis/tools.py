"""The analyst tools: `create_chart`, `profile_table`, `sample_table`, served beside `execute_query`.

Each handler runs on the caller's service (`serving(ctx)`: the identity's role, masking, limits)
inside the audit's `noting`, and its queries go through `SqlService.query`, so admission, the row
cap, masking, clipping, timeouts and the audit note are `execute_query`'s own.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Literal

from mcp import types
from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model

from mcpkit import Context, Tool, ToolAnnotations, ToolResult
from mcpkit.sql.analysis.charts import (
    HEIGHT_PX,
    WIDTH_PX,
    charts_available,
    plan_chart,
    render_png,
)
from mcpkit.sql.analysis.profiling import SAMPLE_MAX, TableProfile, TableSample, profile_table, sample_table
from mcpkit.sql.analysis.render import render_profile, render_sample
from mcpkit.sql.models import Row
from mcpkit.sql.service import SqlService

if TYPE_CHECKING:
    from mcpkit.sql.audit import CallAudit

__all__ = ["ANALYSIS_TOOL_NAMES", "CHART_ROWS", "ChartResult", "analysis_tools"]

log = logging.getLogger("mcpkit.sql")

ANALYSIS_TOOL_NAMES: Final = ("create_chart", "profile_table", "sample_table")
CHART_ROWS: Final = 100
"""Default rows a chart plots (at most the server's `max_rows`)."""
ChartChoice = Literal["auto", "bar", "line", "scatter"]
_READ_ONLY: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class ChartResult(BaseModel):
    """The rows a chart plotted, and what it drew."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="bar, line or scatter")
    x: str
    y: list[str]
    columns: list[str]
    rows: list[Row] = Field(description="The plotted rows, shaped as execute_query's.")
    row_count: int
    truncated: bool = Field(description="True when more rows existed than were plotted.")
    elapsed_ms: float
    png_bytes: int


class TableInput(BaseModel):
    """Arguments of profile_table."""

    model_config = ConfigDict(extra="forbid")

    table: str = Field(min_length=1, max_length=512, description="Table or view, as list_tables shows it.")
    table_schema: str = Field(default="", max_length=256, description="Its schema, when names repeat.")


def _chart_input(max_rows: int) -> type[BaseModel]:
    default = min(CHART_ROWS, max_rows)
    return create_model(
        "CreateChartInput",
        __config__=ConfigDict(extra="forbid"),
        __doc__="Arguments of create_chart.",
        query=(
            str,
            Field(min_length=1, max_length=100_000, description="One SELECT: x first, then numbers."),
        ),
        kind=(
            ChartChoice,
            Field(default="auto", description="auto: from the result's shape."),
        ),
        x=(str, Field(default="", max_length=256, description="x column (default: the first).")),
        y=(list[str], Field(default_factory=list, max_length=6, description="y columns (default: numeric).")),
        title=(str, Field(default="", max_length=200, description="Chart title.")),
        max_rows=(
            StrictInt,
            Field(default=default, ge=1, le=max_rows, description=f"Rows (default {default})."),
        ),
    )


def _sample_input(max_rows: int) -> type[BaseModel]:
    top = min(SAMPLE_MAX, max_rows)
    return create_model(
        "SampleTableInput",
        __base__=TableInput,
        __doc__="Arguments of sample_table.",
        rows=(StrictInt, Field(default=min(10, top), ge=1, le=top, description=f"Rows, at most {top}.")),
    )


def analysis_tools(
    service: SqlService,
    *,
    serving: Callable[[Context], SqlService],
    audited: Callable[[Context], AbstractContextManager[None]],
    calls: CallAudit | None,
    timeout_s: float,
) -> list[Tool]:
    """The analyst tools for `build_server`; `create_chart` only where matplotlib is installed.

    Args:
        service: The server's service (its row cap sizes the input schemas).
        serving: The caller's service (identities).
        audited: The audit's `noting` context for a call.
        calls: The audit, whose `note` records the SQL sent and the rows.
        timeout_s: The tools' outer deadline.
    """

    if calls is not None:  # the audit keeps the chart's query as its statement, as execute_query's
        calls.register("create_chart", statement_argument="query")

    def note_for(ctx: Context) -> Any:
        return partial(calls.note, ctx.call_id) if calls is not None else None

    def create_chart(args: Any, ctx: Context) -> ToolResult:
        with audited(ctx):
            result, text = serving(ctx).query(
                args.query, call_id=ctx.call_id, max_rows=args.max_rows, note=note_for(ctx)
            )
            kind = None if args.kind == "auto" else args.kind
            plan = plan_chart(result, kind=kind, x=args.x or None, y=args.y, title=args.title)
            png = render_png(plan)
        chart = ChartResult(
            kind=plan.kind,
            x=plan.x,
            y=list(plan.y),
            columns=result.columns,
            rows=result.rows,
            row_count=result.row_count,
            truncated=result.truncated,
            elapsed_ms=result.elapsed_ms,
            png_bytes=len(png),
        )
        image = types.ImageContent(
            type="image", data=base64.b64encode(png).decode("ascii"), mime_type="image/png"
        )
        head = f"{plan.kind} chart ({WIDTH_PX}x{HEIGHT_PX} PNG, {len(png)} bytes) of these rows:"
        return ToolResult(text=f"{head}\n{text}", structured=chart, content=[image])

    def profile(args: TableInput, ctx: Context) -> ToolResult:
        with audited(ctx):
            found = profile_table(
                serving(ctx),
                args.table,
                call_id=ctx.call_id,
                schema=args.table_schema or None,
                note=note_for(ctx),
            )
        return ToolResult(text=render_profile(found), structured=found)

    def sample(args: Any, ctx: Context) -> ToolResult:
        with audited(ctx):
            found = sample_table(
                serving(ctx),
                args.table,
                call_id=ctx.call_id,
                rows=args.rows,
                schema=args.table_schema or None,
                note=note_for(ctx),
            )
        return ToolResult(text=render_sample(found), structured=found)

    tools: list[Tool] = []
    if charts_available():
        tools.append(
            Tool(
                name="create_chart",
                title="Chart a query",
                description=(
                    "Run one SELECT like execute_query and draw its rows as a PNG: bar for labels, "
                    "line for dates or rising numbers, scatter otherwise (or set kind). Put x first, "
                    "then numeric columns; aggregate in SQL."
                ),
                input=_chart_input(service.max_rows),
                output=ChartResult,
                handler=create_chart,
                annotations=_READ_ONLY,
                category="sql",
                keywords=("chart", "plot", "graph", "visualize"),
                timeout_s=timeout_s,
            )
        )
    else:
        log.warning("create_chart is off: matplotlib is not installed (pip install 'mcpkit[charts]')")
    tools += [
        Tool(
            name="profile_table",
            title="Profile a table",
            description=(
                "Per column: type, null fraction, distinct estimate, min/max, most common values, "
                "from the database's statistics or a bounded sample. Cheap on large tables."
            ),
            input=TableInput,
            output=TableProfile,
            handler=profile,
            annotations=_READ_ONLY,
            category="sql",
            keywords=("profile", "statistics", "columns", "distribution"),
            timeout_s=timeout_s,
        ),
        Tool(
            name="sample_table",
            title="Sample a table",
            description="A few random rows of one table, without scanning it.",
            input=_sample_input(service.max_rows),
            output=TableSample,
            handler=sample,
            annotations=_READ_ONLY,
            category="sql",
            keywords=("sample", "rows", "example"),
            timeout_s=timeout_s,
        ),
    ]
    return tools
