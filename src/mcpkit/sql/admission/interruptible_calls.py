"""Rewrite: in a SQLite query of many calls, each call is followed by a jump the engine stops at.

SQLite checks `sqlite3_interrupt` (the watchdog's, a second past the deadline) and its progress
handler only at jump opcodes; the calls of one row's expression run back to back with none between
them, each a pass over its argument (red team v3 F8, the open rt35c F2 class: 300 `json_valid(t)`
over a 6.9 MB value answered a 2 s call after 12 s, 300 `length(upper(t))` over 30 MB ran 10 s of
CPU). `CASE WHEN 1 THEN f(x) END` is coded as the call and a Goto, where the interrupt is checked:
the row stops within one call of it. Only in a query of more than `MANY_CALLS` calls over
non-literal values (below that, their passes are about a second at most), and never around a CAST
(its affinity would be lost), a COLLATE or a table-valued call, nor inside a wrapped call (SQLite's parser
stack); an unaliased select item keeps its name.

An aggregate's own step runs in the scan loop, its result only after it: a CASE around the aggregate
is coded after the loop and puts no jump between the rows' steps, so an aggregate is never wrapped,
while the calls in its arguments run per row and are (`SUM(CASE WHEN 1 THEN length(x) END)`).
COUNT's step is constant work per row whatever the value, so a COUNT is not one of the calls counted
(`COUNT(*)`, `COUNT(x)` of the describe tool's profile); COUNT(DISTINCT x) copies and compares the
value for its distinct index, and SUM, AVG, MIN, MAX and the others read or compare it: they count.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

__all__ = ["INTERRUPTIBLE_DIALECTS", "MANY_CALLS", "interruptible_calls"]

INTERRUPTIBLE_DIALECTS: Final = frozenset(["sqlite"])
"""The sqlglot dialects whose engine checks its interrupt only at jumps (SQLite's VM)."""
MANY_CALLS: Final = 16
"""Calls over non-literal values a query may hold as written: 16 passes over 32 MiB, about a second."""
# A CAST's affinity, a CASE's branches and a COLLATE (no call: a compound's ORDER BY term must stay
# a result column with its collation, which a CASE around it is not)
_KEPT: Final = (exp.Cast, exp.TryCast, exp.Case, exp.Collate)


# SQLite's aggregates sqlglot does not parse as one (`AggFunc`)
_AGGREGATE_NAMES: Final = frozenset(["total", "json_group_object"])


def _counted(call: exp.Func) -> bool:
    """Whether `call` is a pass over a non-literal value per row (COUNT's step is not)."""
    if isinstance(call, _KEPT) or isinstance(call.parent, exp.Table | exp.Window | exp.Filter | exp.Case):
        return False  # a CASE's WHEN ... THEN is an `If` node, no call
    if isinstance(call, exp.Count) and not isinstance(call.this, exp.Distinct):
        return False
    return any(isinstance(n, exp.Column | exp.Query) for n in call.walk() if n is not call)


def _aggregate(call: exp.Expr) -> bool:
    if isinstance(call, exp.Anonymous):
        return call.name.lower() in _AGGREGATE_NAMES
    return isinstance(call, exp.AggFunc)


def _outer(call: exp.Expr, wrapped: set[int]) -> bool:
    """No wrapped call holds `call` in the same phase: up to the aggregate whose argument it is."""
    for node in _up(call)[1:]:
        if id(node) in wrapped:
            return False
        if _aggregate(node):
            return True
    return True


def interruptible_calls(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Follow each call by a jump (`CASE WHEN 1 THEN f(x) END`) in a query of over `MANY_CALLS` calls.

    >>> import sqlglot
    >>> sql = "SELECT " + ", ".join(f"upper(a{i})" for i in range(17)) + " FROM t"
    >>> interruptible_calls(sqlglot.parse_one(sql, read="sqlite"), "sqlite").sql("sqlite")[:55]
    'SELECT CASE WHEN 1 THEN UPPER(a0) END AS "UPPER(a0)", C'

    Args:
        tree: One admitted query.
        dialect: The target's sqlglot dialect (rewritten only in `INTERRUPTIBLE_DIALECTS`).

    Returns:
        `tree`, each call over a non-literal value followed by a jump when there are many.
    """
    if dialect not in INTERRUPTIBLE_DIALECTS:
        return tree
    calls = [c for c in tree.find_all(exp.Func) if _counted(c)]
    if len(calls) <= MANY_CALLS:
        return tree
    # only the outermost: a CASE per nested call outgrew SQLite's parser stack (about 100 deep)
    calls = [c for c in calls if not _aggregate(c)]
    wrapped = {id(c) for c in calls}
    calls = [c for c in calls if _outer(c, wrapped)]
    # the name SQLite gives an unaliased select item: its text as sent (`admit`'s options)
    holding = {id(node) for c in calls for node in _up(c)}
    items = [
        (select, i, item.sql(dialect=dialect, normalize_functions=False, comments=False))
        for select in tree.find_all(exp.Select)
        for i, item in enumerate(select.expressions)
        if not isinstance(item, exp.Alias | exp.Column | exp.Star) and id(item) in holding
    ]
    for call in sorted(calls, key=lambda c: -_depth(c)):  # innermost first: an outer call moves them
        call.replace(placeholder := exp.Null())
        placeholder.replace(exp.Case(ifs=[exp.If(this=exp.Literal.number(1), true=call)]))
    for select, i, name in items:  # the item now in that place: the CASE around a call
        item = select.expressions[i]
        item.replace(exp.alias_(item.copy(), name, quoted=True))
    return tree


def _up(node: exp.Expr) -> list[exp.Expr]:
    found = [node]
    while (parent := found[-1].parent) is not None:
        found.append(parent)
    return found


def _depth(node: exp.Expr) -> int:
    return len(_up(node))
