"""What `bound_searches` reads off an operand before the query runs: which argument it is, its
size when written as a literal, and whether it is plainly not text."""

from __future__ import annotations

from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from mcpkit.sql.admission.function_tables import SearchBounds
from mcpkit.sql.admission.functions import function_calls

__all__ = [
    "arguments",
    "bounded_unqualified",
    "is_ascii",
    "operand",
    "parses_text",
    "plainly_scalar",
    "prefix_pattern",
    "static_chars",
    "static_length",
]


def operand(call: exp.Expr, key: str) -> exp.Expr | None:
    """A call's operand by key: `#N` the Nth of `expressions`, else the named argument."""
    if key.startswith("#"):
        args = call.expressions
        index = int(key[1:])
        return args[index] if index < len(args) else None
    value = call.args.get(key)
    return value if isinstance(value, exp.Expr) else None


def static_length(operand: exp.Expr) -> int | None:
    """The byte length of a literal operand (an upper bound: escapes only shrink it), else None."""
    if isinstance(operand, exp.Literal):
        return len(operand.this.encode())
    if isinstance(operand, exp.Cast):  # '{"a": 1}'::jsonb
        return static_length(operand.this)
    if isinstance(operand, exp.Array):  # ARRAY['a', 'b']: its text form, braces and commas
        lengths = [static_length(e) for e in operand.expressions]
        return None if None in lengths else sum(n or 0 for n in lengths) + 2 * len(lengths) + 2
    return None


def static_chars(operand: exp.Expr) -> int | None:
    """The characters of a string literal (bytes in any character set are at least as many)."""
    return len(operand.this) if isinstance(operand, exp.Literal) and operand.is_string else None


def is_ascii(operand: exp.Expr) -> bool:
    """A literal whose every character takes the same bytes in any one character set."""
    return isinstance(operand, exp.Literal) and operand.this.isascii()


def prefix_pattern(pattern: exp.Expr) -> bool:
    """A literal LIKE pattern whose only wildcards are trailing `%`: matched as a prefix, indexable."""
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        return False
    return not any(c in pattern.this.rstrip("%") for c in "%_\\")


# What no typed bound's operand can be: numbers, intervals, times and arithmetic on them.
_SCALAR: Final = (
    exp.Interval,
    exp.Add,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Neg,
    exp.Pow,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.CurrentTimestamp,
    exp.Extract,
    exp.Count,
    exp.Sum,
    exp.Avg,
)


def plainly_scalar(operand: exp.Expr, typed: str, not_text: frozenset[str] = frozenset()) -> bool:
    """An operand written as a number, a time, arithmetic or a cast to another type than `typed`
    (the right operand of a jsonb bound: to a non-array), for which a typed operator is arithmetic
    or a distance: left as written. "text" is any string type, a user type unless in `not_text`."""
    node = operand.unnest()
    if isinstance(node, exp.Literal):
        return not node.is_string
    if isinstance(node, exp.Cast):
        to = node.to
        if typed == "text" and to.this == exp.DataType.Type.USERDEFINED:
            kind = to.args.get("kind")
            return isinstance(kind, exp.Expr) and kind.name.lower() in not_text
        if typed == "text":
            return not to.is_type(*exp.DataType.TEXT_TYPES)
        return not (to.is_type(typed) if typed else to.is_type(exp.DataType.Type.ARRAY) or to.expressions)
    return isinstance(node, _SCALAR)


def arguments(call: exp.Expr) -> list[exp.Expr]:
    """Every argument of a call, as sqlglot holds them (`this`, `expression`, then `expressions`)."""
    named = [call.args.get(key) for key in ("this", "expression")]
    return [a for a in named if isinstance(a, exp.Expr)] + list(call.expressions)


def parses_text(value: exp.Expr, bounds: SearchBounds) -> bool:
    """Whether a cast of `value` may run an input function over a text no literal sizes: not for
    a literal, an ARRAY[...] (each element cast on its own), or a value cast to a type not a
    string (json is parsed again as jsonb)."""
    inner = value.unnest()
    if static_length(value) is not None or isinstance(inner, exp.Array | exp.Null):
        return False
    return (isinstance(inner, exp.Cast) and inner.to.is_type("json")) or not plainly_scalar(
        inner, "text", bounds.not_text
    )


def bounded_unqualified(call: exp.Anonymous, dialect: str, bounds: SearchBounds) -> bool:
    """Whether `schema.f(...)`, which sqlglot reads as an untyped call whose arguments have no
    names to bound, is a bounded call when written `f(...)` (`pg_catalog.strpos(a, b)`)."""
    try:
        typed = sqlglot.parse_one(f"SELECT {call.sql(dialect=dialect)}", read=dialect)
    except ParseError:
        return False
    calls = function_calls(typed, dialect)
    return any(
        not isinstance(c.node, exp.Anonymous) and (c.name in bounds.calls or c.name in bounds.growths)
        for c in calls
    )
