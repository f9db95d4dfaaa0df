"""The arguments of a concatenating aggregate (string_agg, GROUP_CONCAT, json_object_agg, ...) that
its order must be completed with, and the ORDER BY written inside it (`order.pin_order`)."""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.masking.ties import CONCAT_UNORDERED, refuse_order

__all__ = ["positional", "split"]


def _flat(args: list[exp.Expr]) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    for a in args:
        if isinstance(a, exp.Distinct):
            out += list(a.expressions)
        elif isinstance(a, exp.JSONKeyValue):
            out += [v for v in (a.this, a.expression) if isinstance(v, exp.Expr)]
        else:
            out.append(a)
    return out


# Argument slots of a concatenating aggregate that hold values (all of them reach the answer in
# row order: string_agg's per-row separator too), and slots that only modify it.
_VALUE_SLOTS: Final = ("this", "expression", "expressions", "separator", "order")
_MODIFIER_SLOTS: Final = frozenset(
    {"null_handling", "unique_keys", "return_type", "encoding", "strict", "nulls_excluded"}
)


def positional(agg: exp.Expr) -> list[exp.Expr]:
    """The arguments of a concatenating aggregate as written, in order (every value slot)."""
    out: list[exp.Expr] = []
    for key, value in agg.args.items():
        if isinstance(agg, exp.Anonymous) and key == "this":
            continue  # the function's name
        values = value if isinstance(value, list) else [value]
        if not any(isinstance(v, exp.Expr) for v in values):
            continue
        if key not in _VALUE_SLOTS:
            if key in _MODIFIER_SLOTS:
                continue
            refuse_order(CONCAT_UNORDERED, f"aggregate {type(agg).__name__} with argument slot {key}")
        out += [v for v in values if isinstance(v, exp.Expr)]
    return out


def _limit_order(limit: exp.Limit) -> exp.Expr:
    """The ORDER BY inside MariaDB's `GROUP_CONCAT(x ... LIMIT n)` the ties go in (one is made for
    a non-constant `x`): a second ORDER BY after the LIMIT is a syntax error."""
    inner: exp.Expr = limit.this
    if not isinstance(inner, exp.Order) and not isinstance(inner, exp.Literal):
        inner = exp.Order(this=inner, expressions=[])
        limit.set("this", inner)
    return inner


def split(agg: exp.Expr) -> tuple[list[exp.Expr], exp.Order | None]:
    """Every value argument of a concatenating aggregate, and the ORDER BY written inside it.

    Fails closed: an aggregate whose arguments cannot be found is refused, not passed.
    """
    args: list[exp.Expr] = []
    written: exp.Order | None = None
    for arg in positional(agg):
        if isinstance(arg, exp.Limit):  # MariaDB: GROUP_CONCAT(x [ORDER BY k] LIMIT n) (red team v2 L1)
            arg = _limit_order(arg)
        if isinstance(arg, exp.Order):
            written = arg
            arg = arg.this
        if isinstance(arg, exp.Expr):
            args.append(arg)
    args = _flat(args)
    if not args:
        refuse_order(CONCAT_UNORDERED, f"aggregate {type(agg).__name__} without arguments found")
    # constants break no ties (and MariaDB reads an integer in ORDER BY as a position)
    return [a for a in args if not isinstance(a, exp.Literal)], written
