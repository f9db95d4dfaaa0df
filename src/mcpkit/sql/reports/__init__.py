"""Report tools: reviewed questions in `reports.yaml`, each served as its own typed tool.

`load_reports(path, service)` returns the tools, or raises `ReportsError` naming file, report and
line for every problem; see docs/reports.md for the format.
"""

__all__ = [
    "PARAM_TYPES",
    "RESERVED_NAMES",
    "BindError",
    "BoundSql",
    "ParamSpec",
    "ReportRunner",
    "ReportSpec",
    "ReportsError",
    "build_report_tools",
    "input_model",
    "load_reports",
    "parse_reports",
    "prepare_sql",
]

from mcpkit.sql.reports.bind import BindError, BoundSql, prepare_sql
from mcpkit.sql.reports.inputs import input_model
from mcpkit.sql.reports.spec import PARAM_TYPES, ParamSpec, ReportsError, ReportSpec, parse_reports
from mcpkit.sql.reports.tools import RESERVED_NAMES, ReportRunner, build_report_tools, load_reports
