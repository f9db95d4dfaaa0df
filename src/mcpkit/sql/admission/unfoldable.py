"""PostgreSQL folds an immutable call over constants while planning: how a cast guard keeps its
operand from being folded (and evaluated) before the guard runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.operands import operand, static_length
from mcpkit.sql.admission.stored_column import stored_column

__all__ = ["OPERAND_SOURCE", "evaluated_once", "unfoldable"]

OPERAND_SOURCE: Final = "mcpkit_operand"
"""The alias of the one-row subquery a guarded cast reads its operand from."""
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
        if _groupable(placeholder, columns):
            placeholder.replace(exp.Subquery(this=exp.select(value)))
        else:  # a subquery may not read a column grouped only within an expression: a stable test
            stable = exp.Is(this=exp.Anonymous(this="now"), expression=exp.Null())
            placeholder.replace(exp.Case(ifs=[exp.If(this=stable, true=exp.Null())], default=value))


def evaluated_once(call: exp.Expr, key: str) -> exp.Expr | None:
    """Replace the operand `key` of a cast by the column of a one-row subquery that computes it, and
    return that subquery (`OFFSET 0`: not merged, so computed once, and not folded into the cast),
    for the guarded cast to read it from; None (nothing replaced) where `unfoldable` does. A guard
    that tests the operand's type and size computed it five times, more while planning: a 50 MB
    text took 4-6 s to refuse (docs/security.md)."""
    value = operand(call, key)
    columns = _foldable(value)
    if value is None or columns is None or not _groupable(call, columns):
        return None
    value.replace(exp.column("v", table=OPERAND_SOURCE))
    inner = exp.select(exp.alias_(value, "v")).offset(0)
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(OPERAND_SOURCE)))


def _groupable(node: exp.Expr, columns: list[exp.Column]) -> bool:
    """Whether a subquery at `node` may read `columns`: its SELECT is not grouped, or groups by each."""
    select = node.find_ancestor(exp.Select)
    group = select.args.get("group") if select is not None else None
    if not isinstance(group, exp.Group):
        return True
    grouped = {
        (c.table.casefold(), c.name.casefold()) for c in group.expressions if isinstance(c, exp.Column)
    }
    return all((c.table.casefold(), c.name.casefold()) in grouped for c in columns)
