"""Admission: decide, before anything reaches the database, whether a query may run."""

__all__ = [
    "ALLOW_OPTION",
    "CHECKS",
    "DEFAULT_BUDGET",
    "DENYLISTS",
    "PASSES",
    "REWRITES",
    "Admitted",
    "AnalysisBudget",
    "Family",
    "FunctionCall",
    "FunctionCatalog",
    "FunctionPolicy",
    "FunctionRef",
    "FunctionTable",
    "admit",
    "check_lexical",
    "function_calls",
    "load_allowlist",
    "parse_statement",
    "run_passes",
    "table_for",
]

from mcpkit.sql.admission.admit import CHECKS, PASSES, REWRITES, Admitted, admit, run_passes
from mcpkit.sql.admission.budget import DEFAULT_BUDGET, AnalysisBudget
from mcpkit.sql.admission.function_tables import Family, FunctionTable
from mcpkit.sql.admission.functions import DENYLISTS, FunctionCall, function_calls, table_for
from mcpkit.sql.admission.lexical import check_lexical
from mcpkit.sql.admission.parse import parse_statement
from mcpkit.sql.admission.policy import ALLOW_OPTION, FunctionPolicy, load_allowlist
from mcpkit.sql.admission.reject_volatile_functions import FunctionCatalog, FunctionRef
