"""mcpkit sql: a safe SQL tool server that lets an agent look at a database and cannot hurt it.

admission (sqlglot passes)  ->  engines (read-only session, timeout)  ->  shaping  ->  render
"""

__all__ = [
    "PASSES",
    "AccountReport",
    "Admitted",
    "Column",
    "Engine",
    "FakeEngine",
    "FunctionPolicy",
    "PostgresCatalog",
    "QueryFailed",
    "QueryResult",
    "QueryTimeout",
    "Rows",
    "SqlConfigError",
    "SqlEngine",
    "SqlService",
    "TableDescription",
    "TableList",
    "admit",
    "build_server",
    "describe_table",
    "ensure_safe_account",
    "escape_cell",
    "inspect_account",
    "list_tables",
    "load_allowlist",
    "load_demo",
    "normalize_url",
    "render_markdown",
    "shape_cell",
    "shape_rows",
    "write_demo_sqlite",
]

from mcpkit.sql.admission import PASSES, Admitted, FunctionPolicy, admit, load_allowlist
from mcpkit.sql.checks import AccountReport, ensure_safe_account, inspect_account
from mcpkit.sql.demo import load_demo, write_demo_sqlite
from mcpkit.sql.dialects import normalize_url
from mcpkit.sql.engines import Column, Engine, FakeEngine, PostgresCatalog, Rows, SqlEngine
from mcpkit.sql.errors import QueryFailed, QueryTimeout, SqlConfigError
from mcpkit.sql.models import QueryResult, TableDescription, TableList
from mcpkit.sql.reflect import describe_table, list_tables
from mcpkit.sql.render import escape_cell, render_markdown
from mcpkit.sql.server import build_server
from mcpkit.sql.service import SqlService
from mcpkit.sql.shaping import shape_cell, shape_rows
