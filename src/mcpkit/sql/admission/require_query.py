"""Pass: the statement must be a query (SELECT, WITH ... SELECT, set operation, VALUES)."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = ["NOT_A_QUERY", "require_query"]

NOT_A_QUERY = (
    "Only one read-only query is allowed: SELECT, WITH ... SELECT, UNION/INTERSECT/EXCEPT or VALUES; "
    "no transaction control, SET, SHOW, EXPLAIN, PRAGMA, ATTACH, COPY, CALL or DO."
)


def require_query(tree: exp.Expr) -> exp.Expr:
    """Refuse a statement that is not a query.

    >>> import sqlglot
    >>> require_query(sqlglot.parse_one("SELECT 1")).sql()
    'SELECT 1'

    Args:
        tree: One parsed statement.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `not_a_query`.
    """
    if not isinstance(tree, exp.Select | exp.SetOperation | exp.Subquery | exp.Values):
        refuse("not_a_query", NOT_A_QUERY)
    return tree
