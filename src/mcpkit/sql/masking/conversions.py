"""Comparisons that convert a value per row, where a conversion warning fails the call (MariaDB).

MariaDB compares a string with a number as doubles and warns ("Truncated incorrect DOUBLE value",
1292) for each string that is not a number; every call makes a warning an error. So a comparison
across types fails on the rows it reaches, and which rows a subquery reaches before its first match
follows the scan order (red team rtB F1: `1 IN (SELECT 1 FROM customers c WHERE c.id = a OR (c.id = b
AND c.id = p.s) OR ...)`, `p.s` the outer row's `'a'`, failed exactly when b was scanned before a:
the masked score ranking, 63 calls). A block is free of them when every comparison, and every
value read as a truth value, is between operands of one known kind (numbers, text, dates), from
declared column types (`ties.TYPE`) and literals; anything else is unknown, so not free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from datetime import datetime
from typing import Final

from sqlglot import exp

from mcpkit.sql.masking.ties import TYPE

__all__ = ["converts_per_row"]

_NUMBER: Final = r"(tiny|small|medium|big)?int(eger)?|decimal|numeric|dec|fixed|float|double|real|bool(ean)?"
_TEXT: Final = r"(var)?char|(tiny|medium|long)?text|character|national|nchar|nvarchar"
_KINDS: Final = (
    ("number", re.compile(rf"\s*({_NUMBER})\b", re.I)),
    ("text", re.compile(rf"\s*({_TEXT})\b", re.I)),
    ("date", re.compile(r"\s*(date|datetime|timestamp)\b", re.I)),
)
_ANY: Final = "any"  # NULL compares with every kind without converting
# String literals that convert cleanly: MariaDB converts a literal once, and warns only for one that
# does not convert (`'2024-01-05'`, `'2'`, `'2.5'` never warned, also where a CASE made it lazy; `'soon'`
# and `'1e400'` did, on the rows that reached them: review R2)
_CLEAN_NUMBER: Final = re.compile(r"-?\d{1,15}(\.\d{1,15})?")
_CLEAN_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?")
_COMPARISONS: Final = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_LOGIC: Final = (exp.And, exp.Or, exp.Not, exp.Xor)


def _kind(node: exp.Expr) -> str | None:
    """The kind of `node`'s values (None: not known)."""
    node = node.unnest()
    if isinstance(node, exp.Null):
        return _ANY
    if isinstance(node, exp.Boolean):
        return "number"
    if isinstance(node, exp.Literal):
        return "text" if node.is_string else "number"
    if isinstance(node, exp.Column):
        declared = node.meta.get(TYPE) or ""
        return next((kind for kind, pattern in _KINDS if pattern.match(declared)), None)
    if isinstance(node, (*_COMPARISONS, *_LOGIC, exp.Is, exp.Between, exp.In)):
        return "number"  # a truth value
    return None


def _kinds(node: exp.Expr) -> set[str | None]:
    """The kinds `node` compares as without a warning: a string literal that converts cleanly to a
    number or a date is also of that kind."""
    literal = node.unnest()
    if not (isinstance(literal, exp.Literal) and literal.is_string):
        return {_kind(node)}
    text = literal.name
    kinds: set[str | None] = {"text"}
    if _CLEAN_NUMBER.fullmatch(text):
        kinds.add("number")
    if _CLEAN_DATE.fullmatch(text):
        with suppress(ValueError):  # a calendar date (MariaDB would warn on month 13)
            datetime.strptime(text, "%Y-%m-%d %H:%M:%S" if " " in text else "%Y-%m-%d")
            kinds.add("date")
    return kinds


def _alike(*nodes: exp.Expr) -> bool:
    common: set[str | None] | None = None
    for node in nodes:
        kinds = _kinds(node)
        if _ANY in kinds:
            continue
        if None in kinds:
            return False
        common = kinds if common is None else common & kinds
    return common is None or bool(common)


def _truth(node: exp.Expr) -> bool:
    """Whether `node`, read as a truth value (an operand of AND, OR, NOT, WHERE), converts nothing."""
    return _kind(node) in ("number", _ANY)


def _pairs(outer: exp.Expr, select: exp.Select) -> bool:
    """`outer IN (select)`, `outer = ANY (select)`: each outer operand against the output it meets."""
    left = list(outer.unnest().expressions) if isinstance(outer.unnest(), exp.Tuple) else [outer]
    right = [p.unalias() for p in select.selects]
    if len(left) != len(right) or any(p.is_star for p in right):
        return False
    return all(_alike(a, b) for a, b in zip(left, right, strict=True))


def converts_per_row(select: exp.Select, nodes: Iterable[exp.Expr], outer: exp.Expr | None) -> bool:
    """Whether a comparison among `nodes` (what `select` evaluates per row), or the one of the
    subquery's outputs with `outer` (the left operand of IN / ANY / ALL), may convert a value."""
    if outer is not None and not _pairs(outer, select):
        return True
    for node in nodes:
        if isinstance(node, _COMPARISONS) and not _alike(node.this, node.expression):
            return True
        if isinstance(node, exp.Between) and not _alike(node.this, node.args["low"], node.args["high"]):
            return True
        if (
            isinstance(node, exp.In)
            and not node.args.get("query")
            and not _alike(node.this, *node.expressions)
        ):
            return True
        if isinstance(node, exp.Is) and not isinstance(node.expression, exp.Null) and not _truth(node.this):
            return True  # `name IS TRUE` reads the text as a number
        if isinstance(node, _LOGIC) and not all(_truth(o) for o in node.iter_expressions()):
            return True
        if isinstance(node, exp.Where) and not _truth(node.this):
            return True
        if isinstance(node, exp.Join) and node.args.get("on") is not None and not _truth(node.args["on"]):
            return True
    return False
