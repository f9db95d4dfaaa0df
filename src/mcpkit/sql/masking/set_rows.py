"""Set-returning calls whose rows may come in a masked scan order (red team rt27 F8, F9).

A user's function (a call not on the dialect's reviewed list: `--allow function:S.F` admits it)
may read a masked table and return its rows as the scan meets them (PostgreSQL `RETURNS SETOF`):
after CLUSTER on, or an index over, a masked column that order is the masked ranking. Nothing
outside the function can tell whether it returns a set, so each such call counts as one here.

- In a select list a set-returning call multiplies its block's rows: a FROM-less or aggregate
  block is no longer one row, and an ORDER BY on its table's key no longer a total order
  (`multiplies`: `first_row`, `view_order`); a non-SETOF function's `SELECT s.g()` kept the first
  row of g, the smallest e-mail's id.
- Numbering a user call's rows as they come out hands the ranking on whatever ORDER BY follows
  (`numbering`): `WITH ORDINALITY`, `ROWS FROM` beside another function, and several
  set-returning calls in one select list, which run in lockstep. Built-in set-returning calls
  (generate_series, unnest, jsonb_each) answer in the order of their arguments' values, which the
  per-call analysis orders: they stay allowed.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.functions import function_calls
from mcpkit.sql.admission.held_operands import SET_RETURNING, call_names
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.profiles import profile_class

__all__ = ["OPAQUE", "mark_opaque", "multiplies", "numbering", "opaque_calls", "set_returning"]

OPAQUE: Final = "mcpkit_opaque_call"
"""Meta key: a call `mark_opaque` found off the reviewed list (it may return a set)."""


def _maybe(node: exp.Expr) -> bool:
    """A call sqlglot does not know, or one a schema may qualify (`s.f()`, `FROM s.f()`)."""
    if isinstance(node, exp.Table):
        return isinstance(node.this, exp.Func) and node.args.get("db") is not None
    dotted = isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func)
    return dotted or isinstance(node, exp.Anonymous)


@cache
def _reviewed(dialect: str) -> FunctionPolicy:
    return FunctionPolicy.for_dialect(dialect)


def opaque_calls(tree: exp.Expr, dialect: str, scalars: frozenset[str] = frozenset()) -> list[exp.Expr]:
    """The calls in `tree` of a user's function: off the dialect's reviewed list, and a call sqlglot
    does not know or one qualified by a schema; none named in `scalars` (case-folded: functions
    known to return one value, `StoredQuery.one_row`)."""
    policy = _reviewed(dialect)
    return [
        c.node
        for c in function_calls(tree, dialect)
        if c.is_call
        and (isinstance(c.node, exp.Anonymous) or c.schema is not None)
        and c.name.casefold() not in scalars
        and policy.refusal(c) is not None
    ]


def mark_opaque(tree: exp.Expr, dialect: str, scalars: frozenset[str] = frozenset()) -> bool:
    """Mark each `opaque_calls` node (`OPAQUE`, kept by copies) where a user's function may return
    a set (`Profile.user_sets`); True if there is one."""
    if not profile_class(dialect).user_sets or not any(_maybe(n) for n in tree.walk()):
        return False  # no call sqlglot does not know, nor a qualified one: skip generating names
    found = opaque_calls(tree, dialect, scalars)
    for node in found:
        node.meta[OPAQUE] = True
    return bool(found)


def set_returning(node: exp.Expr) -> bool:
    """Whether `node` is a set-returning call: a built-in one, or a user's (`mark_opaque`)."""
    if isinstance(node, exp.UDTF | exp.GenerateSeries | exp.Unnest | exp.Explode):
        return True
    return bool(call_names(node) & SET_RETURNING) or _user(node)


def _user(node: exp.Expr) -> bool:
    return bool(node.meta.get(OPAQUE))


def _own(node: exp.Expr) -> Iterator[exp.Expr]:
    """The nodes of `node`, nested queries aside."""
    return node.walk(prune=lambda n: n is not node and isinstance(n, exp.Query))


def multiplies(select: exp.Expr) -> bool:
    """Whether `select`'s select list holds a set-returning call (`set_returning`)."""
    outputs = select.expressions if isinstance(select, exp.Select) else []
    return any(set_returning(n) for e in outputs for n in _own(e))


def numbering(tree: exp.Expr) -> str | None:
    """The construct of `tree` that numbers the rows of a user's call (`mark_opaque`) as they
    come out, described; None."""
    for table in tree.find_all(exp.Table, exp.Lateral):  # FROM f() or LATERAL f() WITH ORDINALITY
        functions = [f for f in table.args.get("rows_from") or [] if isinstance(f, exp.Expr)]
        called = functions or [table.this]
        if table.args.get("ordinality") and any(_user(n) for f in called for n in _own(f)):
            return "WITH ORDINALITY over a user's function, which numbers its rows in scan order"
        if len(functions) > 1 and any(_user(n) for f in functions for n in _own(f)):
            return "ROWS FROM over a user's function beside another, which numbers its rows in scan order"
    for select in tree.find_all(exp.Select):
        calls = [n for e in select.expressions for n in _own(e) if set_returning(n)]
        if len(calls) > 1 and any(_user(n) for n in calls):
            return "a user's function beside another set-returning call, which numbers its rows in scan order"
    return None
