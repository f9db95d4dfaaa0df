"""The time budget of a query's guarded searches (`bound_searches`), shared among them.

Each guard caps its call's work at its budget, checked before the call; the engine checks for a
timeout or cancel only between rows (or at jumps), so one row may run every guarded call of the
query back to back: 64 searches at full budget kept a PostgreSQL backend 20 s past a 2 s timeout,
40 MariaDB LOCATEs 13 s (red team rt35c F4). A budget is about a quarter to half a second of the
engine's worst case, so up to `FULL` searches keep theirs whole, and past that each gets `FULL / n`
of it: the query's searches together run about `FULL` budgets. Size budgets (what a call builds) are
not shared.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import SearchBounds, SizeBound
from mcpkit.sql.admission.operands import operand, scalar_operands, static_length

__all__ = ["FULL", "SHORT_LITERAL", "exceeds", "fail_when", "many_short", "share", "short"]

FULL: Final = 3
"""Guarded searches one query may hold at their whole time budget (about a second in all)."""
SHORT_LITERAL: Final = 64
"""A literal needle up to this many bytes costs at most that many passes over the haystack: unguarded
while a query has at most `FULL` of them (20 ran 35 s past a 3 s call on PostgreSQL, red team v3 F7)."""
_SHARED: Final = "mcpkit_shared_budget"


def exceeds(cost: exp.Expr, budget: int, shared: bool = False) -> exp.Expr:
    """`cost > budget`; a `shared` budget (a search's time) is divided later by `share`."""
    limit = exp.Literal.number(budget)
    if shared:
        limit.meta[_SHARED] = budget
    return exp.GT(this=cost, expression=limit)


def share(tree: exp.Expr, searches: int) -> None:
    """Give each shared budget in `tree` (copies too) `FULL / searches` of itself, past `FULL` searches."""
    if searches > FULL:
        for node in tree.find_all(exp.Literal):
            if (budget := node.meta.get(_SHARED)) is not None:
                node.set("this", str(max(1, budget * FULL // searches)))


def fail_when(value: exp.Expr, cond: exp.Expr, bounds: SearchBounds, marker: str) -> exp.Expr:
    """`value`, failing with the engine error carrying `marker` when `cond` holds (NULL's type is value's)."""
    fail = exp.Case(ifs=[exp.If(this=cond, true=bounds.fail(cond.copy(), marker))])
    return exp.Case(ifs=[exp.If(this=fail, true=exp.Null())], default=value)


def short(needle: exp.Expr | None) -> bool:
    """Whether `needle` is a literal of at most `SHORT_LITERAL` bytes."""
    return needle is not None and (n := static_length(needle)) is not None and n <= SHORT_LITERAL


def many_short(searches: list[tuple[exp.Expr, object]], bounds: SearchBounds) -> bool:
    """Whether more than `FULL` of (call, bound) search for a short literal (a number or a time in a
    typed operator is arithmetic, no search)."""
    return sum(_short_search(call, bound, bounds) for call, bound in searches) > FULL


def _short_search(call: exp.Expr, bound: object, bounds: SearchBounds) -> bool:
    if not isinstance(bound, SizeBound) or bound.removal:
        return False
    hay, needle = operand(call, bound.haystack), operand(call, bound.needle)
    if hay is None or needle is None or not short(needle):
        return False
    return not scalar_operands(bound.typed, hay, needle, bounds.not_text)
