"""Admission: decide, before anything reaches the database, whether a query may run."""

__all__ = [
    "CHECKS",
    "DENYLISTS",
    "PASSES",
    "REWRITES",
    "Admitted",
    "FunctionCall",
    "FunctionCatalog",
    "FunctionPolicy",
    "FunctionRef",
    "admit",
    "check_lexical",
    "function_calls",
    "load_allowlist",
    "parse_statement",
    "run_passes",
]

from mcpkit.sql.admission.admit import CHECKS, PASSES, REWRITES, Admitted, admit, run_passes
from mcpkit.sql.admission.functions import (
    DENYLISTS,
    FunctionCall,
    FunctionPolicy,
    function_calls,
    load_allowlist,
)
from mcpkit.sql.admission.lexical import check_lexical
from mcpkit.sql.admission.parse import parse_statement
from mcpkit.sql.admission.reject_volatile_functions import FunctionCatalog, FunctionRef
