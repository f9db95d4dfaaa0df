"""PostgreSQL: what calls that build a collection (an array of a split, the matches of a regular
expression, an object of sorted keys) may cost, for `postgres_bounds`' growth guards."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sqlglot import exp

__all__ = [
    "SORTED_ELEMENTS",
    "element_pairs",
    "key_text",
    "recorded_matches",
    "sort_in_a_cast",
    "sorted_elements",
    "split_elements",
]


def _byte_length(operand: exp.Expr) -> exp.Expr:
    return exp.cast(exp.Anonymous(this="octet_length", expressions=[operand]), "BIGINT")


_PER_ELEMENT: Final = 40


def split_elements(call: exp.Expr) -> exp.Expr | None:
    # string_to_array keeps a datum and a copy of each element until the array is built, about 40
    # bytes each (20M characters split by NULL, or 20M commas by ',': 730-810 MB); elements are at
    # most one per character (a NULL delimiter) or per delimiter
    delimiter = call.args.get("expression")
    if isinstance(delimiter, exp.Null):
        return exp.Literal.number(2 + _PER_ELEMENT)
    if isinstance(delimiter, exp.Literal) and delimiter.is_string:
        size = len(delimiter.this.encode())
        return exp.Literal.number(2 + -(-_PER_ELEMENT // size)) if size else None
    if not isinstance(delimiter, exp.Expr):
        return None
    length = exp.func("coalesce", exp.Anonymous(this="octet_length", expressions=[delimiter.copy()]), 1)
    per = exp.IntDiv(this=exp.Literal.number(_PER_ELEMENT), expression=exp.func("greatest", length, 1))
    return exp.paren(exp.Add(this=exp.Literal.number(3), expression=per), copy=False)


def recorded_matches(call: exp.Expr) -> exp.Expr | None:
    # regexp_matches 'g', regexp_count, regexp_instr and regexp_substr record every match of the
    # whole text (and its groups) before answering, on a copy of the text in 4-byte characters:
    # about 14 bytes per character when a match starts at each (10M characters: 142 MB)
    if isinstance(call, exp.Anonymous):  # regexp_matches(text, pattern [, flags])
        args = call.expressions
        flags = args[2] if len(args) > 2 else None
        if flags is None or (isinstance(flags, exp.Literal) and "g" not in flags.this):
            return None  # the first match only
        pattern = args[1] if len(args) > 1 else None
    else:
        pattern = call.args.get("expression")
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        return exp.Literal.number(16 + 8 * pattern.this.count("("))
    if not isinstance(pattern, exp.Expr):
        return None
    groups = exp.Mul(this=exp.Literal.number(4), expression=_byte_length(pattern.copy()))  # '()' is two bytes
    return exp.paren(exp.Add(this=exp.Literal.number(16), expression=groups), copy=False)


def _sized(call: exp.Expr, size: Callable[[exp.Expr], exp.Expr]) -> exp.Expr | None:
    sizes = [
        size(a.copy())
        for a in call.expressions
        if not isinstance((a.this if isinstance(a, exp.Cast) else a), exp.Literal | exp.Null)
    ]  # a literal is the query's own size
    if not sizes:
        return None
    total = sizes[0]
    for each in sizes[1:]:
        total = exp.Add(this=total, expression=each)
    return total


# jsonb_object(text[] [, text[]]) and hstore(text[] [, text[]]) sort and dedupe their keys with no
# interrupt check, as a cast to jsonb does (red team: jsonb_object of two arrays of 3M md5 keys ran
# 8 s past a 1 s timeout and took 2.7 GB): jsonb_object by its arrays' elements (200,000 keys, as
# the cast's 2 MB), hstore, whose arguments may be texts or a row, by their text form's bytes.
SORTED_ELEMENTS: Final = 400_000


def sorted_elements(call: exp.Expr) -> exp.Expr | None:
    return _sized(call, lambda a: exp.cast(exp.Anonymous(this="cardinality", expressions=[a]), "BIGINT"))


def key_text(call: exp.Expr) -> exp.Expr | None:
    return _sized(call, lambda a: _byte_length(exp.cast(a, "TEXT")))


def sort_in_a_cast(tree: exp.Expr) -> None:
    # jsonb_object_agg sorts its keys in its final function, which no guard can precede (3M keys
    # ran 6.9 s past a 2 s timeout, 1.2 GB); json_object_agg(k, v)::jsonb is the same jsonb, and
    # its sort runs in a cast, which `cast_budget` bounds by the object's text
    for agg in list(tree.find_all(exp.JSONBObjectAgg)):
        whole: exp.Expr = exp.JSONObjectAgg(expressions=[agg.this, agg.expression])
        agg.replace(whole)
        while isinstance(whole.parent, exp.Filter | exp.Window) and whole.parent.this is whole:
            whole = whole.parent
        placeholder = exp.Null()
        whole.replace(placeholder)
        placeholder.replace(exp.cast(whole, "JSONB"))


# Element types by their array type's OID (pg_type.dat) whose equality costs about 1e8 pairs/s (weight 1:
# bool, char, int2/4/8, float4/8, oid, timestamp, date, time, timestamptz, interval, uuid) or about 1e7
# (weight 5); any other (jsonb[], record[], a user type) 25.
_CHEAP_ARRAYS: Final = (1000, 1002, 1005, 1007, 1016, 1021, 1022, 1028, 1115, 1182, 1183, 1185, 1187, 2951)
_TEXT_ARRAYS: Final = (1003, 1009, 1014, 1015, 1231, 3802)  # name, text, bpchar, varchar, numeric[]; jsonb


def _elements(operand: exp.Expr) -> exp.Expr:
    items = operand.expressions if isinstance(operand, exp.Array) else None
    if items is not None and all(isinstance(i, exp.Literal | exp.Null) for i in items):
        return exp.Literal.number(len(items))
    text = exp.cast(operand.copy(), "TEXT")
    commas = exp.Replace(
        this=text.copy(), expression=exp.Literal.string(","), replacement=exp.Literal.string("")
    )
    count = exp.Sub(this=_byte_length(text), expression=_byte_length(commas))
    return exp.cast(exp.paren(exp.Add(this=count, expression=exp.Literal.number(1)), copy=False), "NUMERIC")


def element_pairs(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    """The weighted element compares of `left @> right` (and `<@`, `&&`, ...), as SQL (`postgres_bounds`)."""
    # numeric: two counts of a 1 GB text each would overflow bigint. The type is read off the smaller
    # operand: both are of one type, but for `jsonb ?& text[]` (and `-`, and hstore's), both weigh 5.
    smaller = min(left, right, key=lambda e: sum(1 for _ in e.walk()))
    typed = exp.cast(
        exp.Anonymous(this="pg_typeof", expressions=[smaller.copy()]),
        exp.DataType.build("oid", dialect="postgres"),
    )
    weight = exp.Case(
        ifs=[
            exp.If(this=typed.isin(*map(exp.Literal.number, _CHEAP_ARRAYS)), true=exp.Literal.number(1)),
            exp.If(
                this=typed.copy().isin(*map(exp.Literal.number, _TEXT_ARRAYS)), true=exp.Literal.number(5)
            ),
        ],
        default=exp.Literal.number(25),
    )
    return exp.Mul(this=exp.Mul(this=_elements(left), expression=_elements(right)), expression=weight)
