"""Pass: functions on the dialect's denylist are refused wherever they appear; allowlist mode."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.admission.functions import SYNTAX_FUNCTIONS, FunctionPolicy, function_calls, matches
from mcpkit.sql.errors import refuse

__all__ = ["reject_functions"]


def _shown(name: str) -> str:
    return "".join(c for c in name if c.isalnum() or c in "_.$ ")[:64] or "this function"


def reject_functions(tree: exp.Expr, dialect: str, functions: FunctionPolicy | None = None) -> exp.Expr:
    """Refuse denied functions: select list, FROM table functions, quoted, schema-qualified.

    In allowlist mode (`functions.allow` set) every call written `name(...)` must be listed;
    SQL syntax sqlglot models as a function (CAST, EXTRACT, `->>`) is always admitted.

    >>> import sqlglot
    >>> reject_functions(sqlglot.parse_one("SELECT lower(a) FROM t"), "postgres").sql()
    'SELECT LOWER(a) FROM t'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect.
        functions: The policy; the dialect's denylist when omitted.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `function`.
    """
    policy = functions or FunctionPolicy.for_dialect(dialect)
    for call in function_calls(tree, dialect):
        if any(matches(name, policy.deny) for name in call.names):
            refuse(
                "function",
                f"The function {_shown(call.name)} is not allowed; use ordinary SQL functions "
                "(aggregates, window, string, date, math, JSON).",
            )
        if policy.allow is not None and call.is_call and not (call.names & (policy.allow | SYNTAX_FUNCTIONS)):
            refuse(
                "function",
                f"The function {_shown(call.name)} is not on this server's list of reviewed functions; "
                "use only functions on that list.",
            )
    return tree
