"""PostgreSQL folds an immutable call over constants while planning: how a guard that tests an
operand's type keeps the operand from being folded (and evaluated) before the guard runs, where
the operand is not held (`admission.held_operands`, whose `OFFSET 0` subquery is not folded)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.held_operands import groupable
from mcpkit.sql.admission.operands import operand, static_length
from mcpkit.sql.admission.stored_column import stored_column

__all__ = ["unfoldable"]

_NOT_FOLDED: Final = (exp.Query, exp.AggFunc, exp.Window)


def _foldable(value: exp.Expr | None) -> list[exp.Column] | None:
    """The columns of an operand that may be a constant once planned, or None when it cannot be
    (a literal is sized as written; an aggregate or window function is never folded, and would
    change meaning in a subquery; a table's column is stored)."""
    if value is None or static_length(value) is not None or any(value.find_all(*_NOT_FOLDED)):
        return None
    columns = list(value.find_all(exp.Column))
    return None if columns and all(stored_column(c) for c in columns) else columns


def unfoldable(call: exp.Expr, keys: Sequence[str]) -> None:
    """Each operand of `call` that may be a constant becomes a scalar subquery. PostgreSQL evaluates
    an immutable call over constants while planning, before the guard runs, and a guard testing an
    operand's run-time type (`pg_typeof`, stable) is not folded first: `CAST(repeat('x', 5e7) AS
    int)` failed with its whole input in the error, guard or not. A subquery is not folded. A
    column of a CTE or derived table may be a constant once PostgreSQL merges it (red team pg17 F3)."""
    for key in keys:
        value = operand(call, key)
        columns = _foldable(value)
        if value is None or columns is None:
            continue
        placeholder = exp.Null()
        value.replace(placeholder)
        if groupable(placeholder, columns):
            placeholder.replace(exp.Subquery(this=exp.select(value)))
        else:  # a subquery may not read a column grouped only within an expression: a stable test
            stable = exp.Is(this=exp.Anonymous(this="now"), expression=exp.Null())
            placeholder.replace(exp.Case(ifs=[exp.If(this=stable, true=exp.Null())], default=value))
