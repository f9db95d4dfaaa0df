"""Rewrite: drop MySQL's `FROM DUAL`, which sqlglot would send back quoted (a real table name)."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["drop_from_dual"]


def drop_from_dual(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Remove `FROM DUAL` in MySQL; it means "no table" and sqlglot regenerates it as `` `DUAL` ``.

    >>> import sqlglot
    >>> drop_from_dual(sqlglot.parse_one("SELECT 1 FROM DUAL", read="mysql"), "mysql").sql("mysql")
    'SELECT 1'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect.

    Returns:
        `tree`, edited in place.
    """
    if dialect != "mysql":
        return tree
    for select in list(tree.find_all(exp.Select)):
        source = select.args.get("from_") or select.args.get("from")
        if not isinstance(source, exp.From):
            continue
        table = source.this
        if (
            isinstance(table, exp.Table)
            and not table.args.get("db")
            and not table.alias
            and isinstance(table.this, exp.Identifier)
            and not table.this.quoted
            and table.name.lower() == "dual"
            and not select.args.get("joins")
        ):
            source.pop()
    return tree
