"""What `bound_searches` reads off an operand before the query runs: which argument it is, its
size when written as a literal, whether it is plainly not text, and which calls are casts or
hide their operands from a bound."""

from __future__ import annotations

import functools
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from mcpkit.sql.admission.function_tables import SearchBounds
from mcpkit.sql.admission.functions import FunctionCall, function_calls
from mcpkit.sql.errors import refuse

__all__ = [
    "CastTarget",
    "arguments",
    "depth",
    "echoed_inputs",
    "function_cast",
    "is_ascii",
    "operand",
    "parses_text",
    "plainly_scalar",
    "prefix_pattern",
    "refuse_qualified_bounded",
    "row_constructors",
    "scalar_operands",
    "static_chars",
    "static_length",
]


def depth(node: exp.Expr | None) -> int:
    """How many ancestors `node` has (iterative: a long chain nests deeper than Python recurses)."""
    found = -1
    while node is not None:
        node, found = node.parent, found + 1
    return found


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


def scalar_operands(typed: str | None, hay: exp.Expr, needle: exp.Expr, not_text: frozenset[str]) -> bool:
    """Whether an operator typed `typed` (a string, jsonb or array search) is arithmetic here."""
    if not typed:
        return False
    other = typed if typed == "text" else ""  # a string operator takes two strings
    return plainly_scalar(hay, typed, not_text) or plainly_scalar(needle, other, not_text)


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


CastTarget = tuple[exp.Expr, exp.Expr, exp.DataType, str, exp.Expr]
"""What a guard replaces, the cast or call, the type, the operand's key and the operand."""


def function_cast(call: FunctionCall, bounds: SearchBounds, dialect: str) -> CastTarget | None:
    """A call of one argument named after a type (`int4(x)`, `xml(x)`), which the engine runs as a
    cast to that type (through its input function, for a text), as a cast target: the node a guard
    replaces (with its `pg_catalog.`), the call, the type, the argument's key (`operand`) and the
    argument. None for any other call."""
    node = call.node
    if call.name not in bounds.function_casts or call.schema not in (None, bounds.builtin_schema):
        return None
    named = [k for k, v in node.args.items() if isinstance(v, exp.Expr) and k != "expressions"]
    keys = [k for k in named if not (k == "this" and isinstance(node, exp.Anonymous))]  # its name
    keys += [f"#{i}" for i in range(len(node.expressions))]
    value = operand(node, keys[0]) if len(keys) == 1 else None
    if value is None:
        return None
    outer = node.parent if isinstance(node.parent, exp.Dot) else node
    return outer, node, exp.DataType.build(call.name, dialect=dialect, udt=True), keys[0], value


_TEMPLATE: Final = "_mcpkit_arg"


@functools.lru_cache(maxsize=512)
def _template(name: str, count: int, dialect: str) -> tuple[str, type[exp.Expr], tuple[str, ...]] | None:
    """How sqlglot reads `name(a0, ..., aN)`: the call's name (`function_calls`), its node type and
    the key (`operand`) holding each positional argument; None unless each argument has one."""
    args = ", ".join(f"{_TEMPLATE}{i}" for i in range(count))
    try:
        tree = sqlglot.parse_one(f"SELECT {name}({args})", read=dialect)
    except SqlglotError:
        return None
    call = next(iter(function_calls(tree, dialect)), None)
    if call is None:
        return None
    node, keys = call.node, []
    for i in range(count):
        column = f"{_TEMPLATE}{i}"
        found = None
        for key, value in node.args.items():
            for j, item in enumerate(value if isinstance(value, list) else [value]):
                names = (
                    (c.name.lower() for c in item.find_all(exp.Column, exp.Var))
                    if isinstance(item, exp.Expr)
                    else ()
                )
                if column in names:
                    found = f"#{j}" if key == "expressions" else key
        if found is None:  # read as another construct (`convert(a, b)` as a CAST): not this call
            return None
        keys.append(found)
    return call.name, type(node), tuple(keys)


def _argument_count(node: exp.Expr) -> int:
    if isinstance(node, exp.Anonymous):
        return len(node.expressions)
    return sum(len(v) if isinstance(v, list) else isinstance(v, exp.Expr) for v in node.args.values())


def _echoed_keys(call: FunctionCall, bounds: SearchBounds, dialect: str) -> list[str]:
    node = call.node
    if isinstance(node, exp.Anonymous):  # written as the engine names it: positions are keys
        return [f"#{p}" for p in bounds.echoed_inputs.get(call.name, ())]
    count = _argument_count(node)
    named = False
    for name, positions in bounds.echoed_inputs.items():
        read = _template(name, count, dialect)
        if read is None or read[0] != call.name:
            continue
        named = True
        if read[1] is type(node):
            return [read[2][p] for p in positions if p < count]
    # read as another node of this name: every argument is sized
    return [k for k, v in node.args.items() if isinstance(v, exp.Expr)] if named else []


# Operators sqlglot reads as a node of its own, whose engine call quotes an operand: the call's name
# (`SearchBounds.echoed_inputs`) and the operand's key (`x AT TIME ZONE zone` is `timezone(zone, x)`).
_OPERATOR_CALLS: Final[dict[type[exp.Expr], tuple[str, str]]] = {exp.AtTimeZone: ("timezone", "zone")}


def _echoed_inputs(
    call: FunctionCall, bounds: SearchBounds, dialect: str
) -> list[tuple[exp.Expr, str, bool]]:
    if not bounds.echoed_inputs or call.schema not in (None, bounds.builtin_schema):
        return []
    if bounds.echo_excluded is not None and bounds.echo_excluded(call.name, call.node):
        return []
    from mcpkit.sql.admission.held_operands import SET_RETURNING  # it reads this module

    keys = _echoed_keys(call, bounds, dialect)
    outer = call.node.parent if isinstance(call.node.parent, exp.Dot) else call.node
    in_from = isinstance(call.node.find_ancestor(exp.Table, exp.Select), exp.Table)
    rows = call.name in SET_RETURNING or in_from
    found = [(k, v) for k in keys if (v := operand(call.node, k)) is not None and not isinstance(v, exp.Var)]
    return [(outer, k, rows) for k, v in found if _quotable(v, bounds)]


def _quotable(value: exp.Expr, bounds: SearchBounds) -> bool:
    # an ARRAY[...] of computed text is quoted element by element (jsonb_set's path)
    arrayed = isinstance(value.unnest(), exp.Array) and static_length(value) is None
    return arrayed or parses_text(value, bounds)


def echoed_inputs(
    tree: exp.Expr, bounds: SearchBounds, dialect: str
) -> list[tuple[exp.Expr, exp.Expr, str, bool]]:
    """The operands whose error quotes them whole (`SearchBounds.echoed_inputs`, by the engine's name
    and positions, as sqlglot reads each call; and the operators that run such a call,
    `_OPERATOR_CALLS`): the node a guard replaces (with its `pg_catalog.`), the node holding the
    operand, its key (`operand`) and whether the guard wraps the operand instead (a set-returning
    call, or one in FROM, cannot sit in a CASE)."""
    found: list[tuple[exp.Expr, exp.Expr, str, bool]] = [
        (n, c.node, k, w)
        for c in function_calls(tree, dialect)
        for n, k, w in _echoed_inputs(c, bounds, dialect)
    ]
    for node in tree.find_all(*_OPERATOR_CALLS):
        name, key = _OPERATOR_CALLS[type(node)]
        value = operand(node, key)
        if name in bounds.echoed_inputs and value is not None and parses_text(value, bounds):
            found.append((node, node, key, False))
    return found


def refuse_qualified_bounded(call: FunctionCall, bounds: SearchBounds, dialect: str) -> None:
    """Refuse a call qualified with the built-in schema that sqlglot reads as an unknown function,
    while written bare it is one with a bound (`pg_catalog.repeat(x, n)`, `pg_catalog.strpos(a,
    b)`): the bound could not find its operands, so the call would run unguarded."""
    node = call.node
    if call.schema is None or call.schema != bounds.builtin_schema or not isinstance(node, exp.Anonymous):
        return
    bare = exp.Anonymous(this=call.name, expressions=[exp.null() for _ in node.expressions])
    try:
        typed = sqlglot.parse_one(bare.sql(dialect=dialect), read=dialect)
    except SqlglotError:
        return
    names = (
        {c.name for c in function_calls(typed, dialect)} if not isinstance(typed, exp.Anonymous) else set()
    )
    if any(n in bounds.calls or n in bounds.growths for n in names):
        refuse(
            "function",
            f"Call {call.name}() without its {call.schema}. prefix, so that the size of its operands can be"
            " bounded.",
        )


def row_constructors(tree: exp.Expr) -> list[exp.Expr]:
    """`ARRAY[...]` of values and a `(a, b)` row made as a value (not compared, not a VALUES row):
    each builds from its elements as `ROW(...)` does (red team v3 F2: 20 x 20 MB cast to text, 1.5 GB)."""
    found: list[exp.Expr] = []
    for node in tree.find_all(exp.Array, exp.Tuple):
        if not node.expressions or any(isinstance(e, exp.Query | exp.Subquery) for e in node.expressions):
            continue
        if isinstance(node, exp.Array) or isinstance(
            node.parent, exp.Select | exp.Alias | exp.Cast | exp.Func
        ):
            found.append(node)
    return found
