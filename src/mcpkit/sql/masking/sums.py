"""Sums whose answer, or whose error, depends on the order they add in (red team rt33c F3).

PostgreSQL adds floating-point values (sum, avg, stddev, variance, corr, covar, regr), intervals
and money in the order the scan hands them: the last digits differ with it, and an overflow
("value out of range", "interval out of range", "money out of range") happens or not with it
(`sum(CASE id WHEN 2 THEN interval '2000000000 months' WHEN 5 THEN interval '-2000000000 months'
...)` errs only when 2 and 4 come before 5): where the scan follows a masked column, one bit of its
ranking per call. Over a masked read such an aggregate is ordered by its arguments and their exact
text forms, as the concatenating ones are, so it adds the same values in the same order whatever the
scan: `sum(x ORDER BY x, format('%L', x) COLLATE "C")`. An argument whose sum is exact (integer and
numeric columns by their declared type, number literals, which PostgreSQL reads as numeric, a cast to an
integer or numeric type, arithmetic and CASE over those) is left alone: sorting costs. Not in a
window PostgreSQL takes no ORDER BY inside the call: a window without ORDER BY (`sum(x) OVER ()`,
`OVER (PARTITION BY k)`: the whole partition) is given `ORDER BY x, <exact x>` and a ROWS frame over
the whole partition, which adds in that order (red team v4 F1: `sum(x) OVER ()` added in the e-mail
order); one with ORDER BY and a ROWS frame is completed with visible columns (`ties.window_keys`);
one with ORDER BY and a RANGE or GROUPS frame (the default) adds its peers in scan order and is
refused; a named window is written inline before (`named_windows`), one left named is refused.
MariaDB and SQLite take no ORDER BY in these aggregates (`Profile.ordered_sums`): there a window is
rewritten the same way, and an aggregate whose sum is not exact is refused (red team rtB F2:
`SUM(CASE WHEN id = x THEN 1e30 WHEN id = r THEN -1e30 ELSE POW(2, id) END)` answered, in its bits,
the set of rows scanned after both, the masked score ranking in 4 calls a row). There a number
literal with an exponent is a double, and MariaDB computes STD and VARIANCE in doubles whatever the
argument. On SQLite (`Profile.sum_overflows`) a decimal literal is a REAL too, sum and avg of exact
values are sent in halves (`_SPLIT`; rth F1, F2), and sum/avg DISTINCT are refused (rth F3).
"""

from __future__ import annotations

import re
from typing import Final

import sqlglot
from sqlglot import exp

from mcpkit.sql.admission.budget import NodeAllowance
from mcpkit.sql.masking.ties import EXACT, TYPE, refuse_order
from mcpkit.sql.profiles import profile_class

__all__ = ["exact", "pin_sums"]

_EXACT_TYPE: Final = re.compile(
    r"\s*((tiny|small|medium|big)?int(eger|[248])?|(big|small)?serial|numeric|decimal)\b", re.IGNORECASE
)
_ONE_ARGUMENT: Final = (
    exp.Sum,
    exp.Avg,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
    exp.Variance,
    exp.VariancePop,
)
# Always in float8, whatever the arguments' type.
_FLOATING: Final = (
    exp.Corr,
    exp.CovarPop,
    exp.CovarSamp,
    exp.RegrAvgx,
    exp.RegrAvgy,
    exp.RegrIntercept,
    exp.RegrR2,
    exp.RegrSlope,
    exp.RegrSxx,
    exp.RegrSxy,
    exp.RegrSyy,
)
_ARITHMETIC: Final = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_INTEGRAL: Final = (
    exp.Length, exp.Year, exp.Month, exp.Day, exp.DateDiff, exp.TimestampDiff, exp.Sign, exp.Ascii,
    exp.BitLength,
    exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Is, exp.In, exp.Between, exp.Not, exp.And, exp.Or,
)  # fmt: skip
_MOMENTS: Final = (exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop)
_UNORDERED_SUM: Final = (
    "Over a table with masked columns, a floating-point sum or average (SUM, AVG of a DOUBLE or FLOAT "
    "value or one whose type is not known; SQLite TOTAL; STD and VARIANCE, computed in floating point) "
    "is not answered on this database: it adds in the storage order; sum exact values instead, for example "
    "SUM(CAST(x AS DECIMAL(30, 10)))."
)
_DISTINCT_SUM: Final = (
    "Over a table with masked columns, SUM(DISTINCT ...) and AVG(DISTINCT ...) are not answered on this "
    "database: they add in the storage order; sum the distinct values in a subquery instead."
)
_WINDOW_SUM: Final = (
    "Over a table with masked columns, a floating-point, interval or money sum (sum, avg, stddev, "
    "variance, corr, regr_*) over a window with ORDER BY needs a ROWS frame (for example ROWS BETWEEN "
    "UNBOUNDED PRECEDING AND CURRENT ROW) and an inline window; or cast its argument to numeric."
)
_WHOLE: Final = {"start": "UNBOUNDED", "start_side": "PRECEDING", "end": "UNBOUNDED", "end_side": "FOLLOWING"}


def exact(node: exp.Expr, numeric_literals: bool | None = True, exact_round: bool = False) -> bool:
    """Whether values of `node` add up to the same sum in any order (and never overflow).
    `numeric_literals`: every number literal is exact (PostgreSQL: `1e30` is numeric, not a double);
    None: those without an exponent (MariaDB: `1.5` is a decimal); False: integer literals only (SQLite);
    `exact_round`: `round()` of an exact value is exact (not on SQLite: `Profile.float_round`; rte L3)."""
    if isinstance(node, exp.Round):
        parts = [node.this, node.args.get("decimals")]
        return exact_round and all(p is None or exact(p, numeric_literals, exact_round) for p in parts)
    if isinstance(node, exp.Column):
        return bool(_EXACT_TYPE.match(node.meta.get(TYPE) or ""))
    if isinstance(node, exp.Literal):
        if numeric_literals is False:
            return node.is_int
        return node.is_number and (bool(numeric_literals) or "e" not in node.name.casefold())
    if isinstance(node, (exp.Null, exp.Boolean, *_INTEGRAL)):
        return True
    if isinstance(node, exp.Cast):
        return bool(_EXACT_TYPE.match(node.to.sql("postgres")))
    if isinstance(node, exp.Paren | exp.Neg | exp.Abs):
        return exact(node.this, numeric_literals, exact_round)
    if isinstance(node, _ARITHMETIC):
        return exact(node.this, numeric_literals, exact_round) and exact(
            node.expression, numeric_literals, exact_round
        )
    values: list[exp.Expr | None] = []
    if isinstance(node, exp.Case):
        values = [i.args.get("true") for i in node.args.get("ifs") or []] + [node.args.get("default")]
    elif isinstance(node, exp.If):
        values = [node.args.get("true"), node.args.get("false")]
    elif isinstance(node, exp.Coalesce):
        values = [node.this, *node.expressions]
    else:
        return False
    return all(v is None or exact(v, numeric_literals, exact_round) for v in values)


def pin_sums(
    tree: exp.Expr, dialect: str, masked_aggs: frozenset[int], room: NodeAllowance, label: str
) -> bool:
    """Order, in place, every aggregate of `tree` that adds in scan order (above); True if changed.

    Args:
        tree: The work tree of a query over a masked read.
        dialect: The engine's dialect.
        masked_aggs: Ids of aggregates that read a masked value (their output is masked anyway).
        room: The node allowance the tie-breakers are counted against.
        label: What `room` calls them when it refuses.
    """
    profile = profile_class(dialect)
    ordered = profile.ordered_sums  # else a window is ordered here, an aggregate refused (rtB F2)
    pinned = False
    for agg in list(tree.find_all(*_ONE_ARGUMENT, *_FLOATING, exp.Anonymous)):
        total = isinstance(agg, exp.Anonymous)
        if id(agg) in masked_aggs or (total and not _is_float_sum(agg, profile.float_sums)):
            continue
        window = _window(agg)
        slots = ["this", "expression"] if isinstance(agg, _FLOATING) else ["this"]
        last = slots[-1]
        written = agg.args.get(last) if isinstance(agg.args.get(last), exp.Order) else None
        found = agg.expressions[:1] if total else [agg.args.get(s) for s in slots]
        if written is not None:  # `sum(x ORDER BY k)`: k's ties still come in scan order
            found[-1] = written.this
        args = [a for a in found if isinstance(a, exp.Expr)]
        if len(args) != len(slots):
            continue
        distinct = isinstance(args[0], exp.Distinct)
        values: list[exp.Expr] = list(args[0].expressions) if distinct else args
        floating = total or isinstance(agg, _FLOATING) or (not ordered and isinstance(agg, _MOMENTS))
        halves = profile.sum_overflows and isinstance(agg, exp.Sum | exp.Avg)
        literals = ordered or (False if halves else None)  # SQLite: `1.0` is a double (rth F2)
        if not floating and all(exact(v, literals, not profile.float_round) for v in values):
            if halves and distinct:  # adds the distinct values in scan order (rth F3); halves would differ
                refuse_order(_DISTINCT_SUM, f"{type(agg).__name__}(DISTINCT) where it cannot be ordered")
            if halves:  # avg adds in doubles in scan order (rth F1): the exact sum / count
                room.add([_split_sum(agg, values[0], window)], label)
                pinned = True
            continue
        if window is not None and _framed(window):
            continue
        if window is None and not ordered:
            refuse_order(_UNORDERED_SUM, f"{type(agg).__name__} of inexact values where it cannot be ordered")
        ties: list[exp.Expr] = []
        small = not ordered  # MariaDB, SQLite: NULLs sort first, and no NULLS FIRST/LAST is written
        for value in values:
            ties.append(exp.Ordered(this=value.copy(), nulls_first=small))
            if not distinct and value.meta.get(EXACT, True):  # DISTINCT: ORDER BY names arguments only
                ties += [exp.Ordered(this=e, nulls_first=small) for e in profile.exact_ties(value)]
        room.add(ties, label)
        if window is not None:  # the whole partition, added in this order
            window.set("order", exp.Order(expressions=ties))
            window.set("spec", exp.WindowSpec(kind="ROWS", **_WHOLE))
        elif written is not None:
            written.set("expressions", [*written.expressions, *ties])
        else:
            agg.set(last, exp.Order(this=agg.args[last].copy(), expressions=ties))
        pinned = True
    return pinned


# SQLite's integer sum fails ("integer overflow") when a partial sum leaves 64 bits: whether it does
# follows the order it adds in (red team rte F5: the masked e-mail order, rows written in it). Summed in
# 32-bit halves no partial sum can overflow (below 2^31 rows); the halves' total leaves 64 bits as a
# double, whatever the order. Values that are not all integers (a REAL in a NUMERIC column) would add in
# doubles in scan order (`total`, rth F2): below 2^62 they are summed in fixed point instead, the integer
# part and the fraction in units of 2^-60 (bits below are dropped, alike in any order); a larger or
# infinite one fails the query (`abs()` of the smallest integer: "integer overflow"). avg(x) is that sum,
# made a double once, over the count (rth F1).
_HALVES: Final = "(SUM(_v / 4294967296) * 4294967296 + SUM(_v % 4294967296))"
_WHOLE_PART: Final = "CAST(CAST(_x AS REAL) AS INTEGER)"
_FRACTION: Final = (
    "CAST((CAST(_x AS REAL) - CAST(CAST(_x AS REAL) AS INTEGER)) * 1152921504606846976 AS INTEGER)"
)
_SPLIT: Final = (
    "CASE WHEN COUNT(_x) = COUNT(CASE WHEN TYPEOF(_x) = 'integer' THEN 1 END)"
    f" THEN {_HALVES.replace('_v', '_x')}"
    " WHEN COUNT(CASE WHEN ABS(CAST(_x AS REAL)) >= 4611686018427387904.0 THEN 1 END) = 0"
    f" THEN {_HALVES.replace('_v', _WHOLE_PART)} + {_HALVES.replace('_v', _FRACTION)} / 1152921504606846976.0"
    " ELSE ABS(-9223372036854775807 - 1) END"
)
_AVERAGE: Final = f"CAST(({_SPLIT}) AS REAL) / COUNT(_x)"


def _split_sum(agg: exp.Expr, value: exp.Expr, window: exp.Window | None) -> exp.Expr:
    """`sum(x)`, `avg(x)` -> the order-independent forms above, in place (its FILTER and window kept on
    each aggregate of it)."""
    call = agg.parent if isinstance(agg.parent, exp.Filter) and agg.arg_key == "this" else agg
    split = sqlglot.parse_one(_AVERAGE if isinstance(agg, exp.Avg) else _SPLIT, read="sqlite")
    for column in list(split.find_all(exp.Column)):
        column.replace(value.copy())
    for inner in list(split.find_all(exp.Count, exp.Sum)):
        wrapped: exp.Expr = inner.copy()
        if call is not agg:
            wrapped = exp.Filter(this=wrapped, expression=call.expression.copy())
        if window is not None:
            over = window.copy()
            over.set("this", wrapped)
            wrapped = over
        inner.replace(wrapped)
    (call if window is None else window).replace(exp.Paren(this=split))
    return split


def _is_float_sum(call: exp.Expr, names: frozenset[str]) -> bool:
    """A call of `Profile.float_sums` (SQLite's `total(x)`: added in doubles, even integers; red team rte)."""
    return isinstance(call, exp.Anonymous) and call.name.casefold() in names and len(call.expressions) == 1


def _window(agg: exp.Expr) -> exp.Window | None:
    """The window `agg` is computed over (through its FILTER), or None."""
    call = agg.parent if isinstance(agg.parent, exp.Filter) and agg.arg_key == "this" else agg
    parent = call.parent
    return parent if isinstance(parent, exp.Window) and call.arg_key == "this" else None


def _framed(window: exp.Window) -> bool:
    """True: a ROWS frame, whose ORDER BY `ties.window_keys` completes; False: a window over its whole
    partition (no ORDER BY), to order here; refused: an ordered RANGE/GROUPS frame adds peers in scan
    order, a named window cannot be rewritten here (red team v4 F1)."""
    spec = window.args.get("spec")
    kind = str(spec.args.get("kind") or "").upper() if isinstance(spec, exp.WindowSpec) else ""
    if kind == "ROWS" and window.args.get("alias") is None:
        return True
    odd = isinstance(spec, exp.WindowSpec) and spec.args.get("exclude") is not None
    if window.args.get("order") is not None or window.args.get("alias") is not None or odd:
        refuse_order(_WINDOW_SUM, "floating-point sum over a RANGE/GROUPS or named window")
    return False
