"""Pass: where the database can tell, refuse functions that are not immutable or stable."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from sqlglot import exp

from mcpkit.sql.admission.functions import function_calls
from mcpkit.sql.errors import refuse

__all__ = ["FunctionCatalog", "FunctionRef", "reject_volatile_functions"]

FunctionRef = tuple[str | None, str]
"""(schema or None, name) as the database resolves them: unquoted parts folded to lower case."""


class FunctionCatalog(Protocol):
    """Answers which functions may change state (PostgreSQL: `pg_proc.provolatile = 'v'`)."""

    def volatile(self, refs: Collection[FunctionRef]) -> set[FunctionRef]:
        """Return the refs that resolve to a function that is neither immutable nor stable."""
        ...


def reject_volatile_functions(
    tree: exp.Expr, dialect: str, catalog: FunctionCatalog | None = None
) -> exp.Expr:
    """Refuse calls the database itself marks volatile, so user-defined side effects are caught too.

    >>> import sqlglot
    >>> reject_volatile_functions(sqlglot.parse_one("SELECT f(1)"), "postgres").sql()
    'SELECT F(1)'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect.
        catalog: Looks the names up; without one this pass does nothing.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `volatile_function`.
    """
    if catalog is None:
        return tree
    calls = {(c.db_schema, c.db_name): c for c in function_calls(tree, dialect) if c.is_call}
    if not calls:
        return tree
    volatile = catalog.volatile(list(calls))
    for ref, call in calls.items():
        if ref in volatile:
            shown = "".join(ch for ch in call.name if ch.isalnum() or ch in "_.$ ")[:64]
            refuse(
                "volatile_function",
                f"The function {shown} can change state (it is not immutable or stable), so it is not "
                "allowed; use read-only functions.",
            )
    return tree
