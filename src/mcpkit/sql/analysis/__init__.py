"""Tools analysts reach for, on the path of `execute_query`: charts, table profiles, samples."""

from mcpkit.sql.analysis.charts import ChartPlan, charts_available, plan_chart, render_png
from mcpkit.sql.analysis.profiling import TableProfile, TableSample, profile_table, sample_table
from mcpkit.sql.analysis.tools import ANALYSIS_TOOL_NAMES, ChartResult, analysis_tools

__all__ = [
    "ANALYSIS_TOOL_NAMES",
    "ChartPlan",
    "ChartResult",
    "TableProfile",
    "TableSample",
    "analysis_tools",
    "charts_available",
    "plan_chart",
    "profile_table",
    "render_png",
    "sample_table",
]
