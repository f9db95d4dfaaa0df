"""Pass: no PostgreSQL attribute notation that calls a function (`(x).pg_sleep`, `t.nextval`)."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.admission.function_tables import matches
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.errors import refuse

__all__ = ["reject_attribute_calls"]

_MESSAGE = (
    "Attribute notation on an expression, such as (x).name or alias.function_name, is not allowed; "
    "call functions directly by name."
)


def reject_attribute_calls(tree: exp.Expr, dialect: str, functions: FunctionPolicy | None = None) -> exp.Expr:
    """Refuse attribute notation that PostgreSQL may read as a function call.

    PostgreSQL reads `x.f` as `f(x)` for a composite `x`, so `(col).pg_sleep` calls pg_sleep
    although the tree holds no function node. Refuses a Dot on a parenthesised expression, and a
    qualified name whose last part names a denied function.

    >>> import sqlglot
    >>> reject_attribute_calls(sqlglot.parse_one("SELECT t.a FROM t", read="postgres"), "postgres").sql()
    'SELECT t.a FROM t'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect; only PostgreSQL has attribute calls.
        functions: The policy whose denylist names the functions.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `attribute_call`.
    """
    if dialect != "postgres":
        return tree
    deny = (functions or FunctionPolicy.for_dialect(dialect)).deny
    exact = {p.rstrip("*") for p in deny}
    for node in tree.find_all(exp.Dot, exp.Column):
        if isinstance(node, exp.Dot):
            if isinstance(node.this, exp.Paren):
                refuse("attribute_call", _MESSAGE)
            last = node.expression
            if isinstance(last, exp.Identifier) and matches(last.name.lower(), deny):
                refuse("attribute_call", _MESSAGE)
        elif isinstance(node, exp.Column) and node.table and node.name.lower() in exact:
            # alias.name resolves to a column first; only an exact denied name is refused, so a
            # real column such as t.lo_limit is not caught by the `lo_*` pattern.
            refuse("attribute_call", _MESSAGE)
    return tree
