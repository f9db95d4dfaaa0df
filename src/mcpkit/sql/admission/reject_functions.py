"""Pass: every function call must be on the engine's reviewed allowlist (or added by the operator);
the never list is refused whatever the options (see `mcpkit.sql.admission.policy`)."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.admission.functions import function_calls
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.errors import refuse

__all__ = ["reject_functions"]


def reject_functions(tree: exp.Expr, dialect: str, functions: FunctionPolicy | None = None) -> exp.Expr:
    """Refuse functions off the allowlist: select list, FROM table functions, quoted, schema-qualified.

    SQL syntax sqlglot models as a function (CAST, EXTRACT, `->>`) is always admitted; the refusal
    names the function and how the operator can allow it.

    >>> import sqlglot
    >>> reject_functions(sqlglot.parse_one("SELECT lower(a) FROM t"), "postgres").sql()
    'SELECT LOWER(a) FROM t'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect.
        functions: The policy; the dialect's default when omitted.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `function`.
    """
    policy = functions or FunctionPolicy.for_dialect(dialect)
    for call in function_calls(tree, dialect):
        message = policy.refusal(call)
        if message is not None:
            refuse("function", message)
    return tree
