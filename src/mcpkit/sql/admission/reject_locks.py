"""Pass: no locking clause (FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE) anywhere."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = ["reject_locks"]

_MESSAGE = "Locking clauses (FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE) are not allowed; use a plain SELECT."


def reject_locks(tree: exp.Expr) -> exp.Expr:
    """Refuse row-locking clauses at any depth.

    >>> import sqlglot
    >>> reject_locks(sqlglot.parse_one("SELECT 1")).sql()
    'SELECT 1'

    Args:
        tree: One parsed statement.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `lock`.
    """
    if tree.find(exp.Lock) is not None:
        refuse("lock", _MESSAGE)
    return tree
