"""Pass: no unbound parameters and no session or user variables."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = ["reject_parameters"]

_PARAMETER = "Bind parameters are not supported; write literal values into the query."
_VARIABLE = "Session and user variables (@x, @@x, :=) are not allowed; write literal values into the query."
# SQLite reads an unquoted name starting with one of these as a parameter; sqlglot reads a column.
_PARAMETER_SIGILS = ("$", ":", "@", "?")


def reject_parameters(tree: exp.Expr, dialect: str = "") -> exp.Expr:
    """Refuse `?`, `$1`, `:name`, `%s`, `%(x)s`, `@var`, `@@var` and `@var := ...`.

    >>> import sqlglot
    >>> reject_parameters(sqlglot.parse_one("SELECT '?'")).sql()
    "SELECT '?'"

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect (SQLite reads `$a`, `:a`, `@a` as parameters).

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `parameter` or `variable`.
    """
    # `@x := 1` is caught by its Parameter; a bare `:=` is PostgreSQL's named-argument notation.
    for node in tree.find_all(exp.Placeholder, exp.Parameter, exp.SessionParameter, exp.Identifier):
        if isinstance(node, exp.Identifier):
            if dialect == "sqlite" and not node.quoted and node.name.startswith(_PARAMETER_SIGILS):
                refuse("parameter", _PARAMETER)
        elif isinstance(node, exp.Placeholder) or (
            isinstance(node, exp.Parameter) and isinstance(node.this, exp.Literal)
        ):
            refuse("parameter", _PARAMETER)
        else:
            refuse("variable", _VARIABLE)
    return tree
