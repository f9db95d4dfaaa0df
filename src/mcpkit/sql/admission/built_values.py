"""Values that builders make, for `bound_searches`: the concatenations whose answer multiplies
their operands, and guards that compute a builder's operands once.

`s || s`, `concat(x, x)`, `array_cat(a, a)` and `concat_ws(sep, ...)` (its separator once between
each two values) answer several times their operands, and a recursive CTE doubles them at each
step (red team pg17 F1: 27 steps of `s || s` took a backend to 1.6 GB; `array_cat(a, a)` three
times over a 60 MB array 1.1 GB). Their answer is capped like a builder's (`answer_bound`): when
an operand appears twice, when one holds a call that builds (repeat, format, a subquery, an
aggregate...), or inside WITH RECURSIVE. A concatenation of plain columns is left as written.

A guard measures an operand, then the call computes it again: PostgreSQL does not share the two,
and every value a row computes stays until the row is done, so nested guards double the work at
each level (three guarded `encode(convert_to(...), 'hex')` took a backend to 780 MB where the
unguarded call took 435 MB). A computed operand of a builder is held in a subquery and read
twice: `(SELECT <guarded call over h.v0> FROM (SELECT <operand> AS v0) AS h)` (`hold`, `wrap`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import GrowthBound, SearchBounds
from mcpkit.sql.admission.operands import arguments, plainly_scalar, static_length
from mcpkit.sql.errors import refuse

__all__ = ["HOLD", "answer_bound", "answer_roots", "hold", "wrap"]

_LINKS = (exp.DPipe, exp.Concat, exp.ConcatWs, exp.ArrayConcat, exp.ArrayAppend, exp.ArrayPrepend)


def _names(node: exp.Expr) -> set[str]:
    if isinstance(node, exp.Anonymous):
        return {node.name.lower()}
    if isinstance(node, exp.Func):
        return {n.lower() for n in (node.sql_name(), *getattr(type(node), "_sql_names", ()))}
    return set()


def _leaves(link: exp.Expr) -> list[tuple[exp.Expr, int]]:
    """Each operand under `link`, nested links opened, and how many times the answer holds it."""
    out: list[tuple[exp.Expr, int]] = []
    parts = arguments(link.unnest())
    for i, part in enumerate(parts):
        if isinstance(part.unnest(), _LINKS):
            out.extend(_leaves(part))
        elif isinstance(link.unnest(), exp.ConcatWs) and i == 0:  # between each two values
            out.append((part, max(len(parts) - 2, 1)))
        else:
            out.append((part, 1))
    return out


def _held(link: exp.Expr) -> dict[str, tuple[exp.Expr, int]]:
    found: dict[str, tuple[exp.Expr, int]] = {}
    for leaf, times in _leaves(link):
        if not isinstance(leaf.unnest(), exp.Literal | exp.Null):
            key = leaf.sql()
            found[key] = (found[key][0] if key in found else leaf, found.get(key, (leaf, 0))[1] + times)
    return found


def _builds(leaf: exp.Expr, builders: Collection[str]) -> bool:
    """A subquery, a collecting aggregate (`*_agg`, group_concat) or a builder under `leaf`."""
    names = {name for n in leaf.walk() for name in _names(n)}
    collects = any(n.endswith("agg") or n == "group_concat" for n in names)
    return bool(collects or names & set(builders) or any(leaf.find_all(exp.Query)))


def answer_roots(tree: exp.Expr, bounds: SearchBounds) -> list[exp.Expr]:
    """The outermost links of each concatenation whose answer may multiply its operands (an
    operand holding one of `bounds.growths` builds)."""
    recursive = any(w.args.get("recursive") for w in tree.find_all(exp.With))
    roots: list[exp.Expr] = []
    for node in tree.find_all(*_LINKS):
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if isinstance(parent, _LINKS):
            continue
        held = _held(node)
        repeated = any(times > 1 for _, times in held.values())
        built = any(_builds(leaf, bounds.growths) for leaf, _ in held.values())
        if repeated or (len(held) > 1 and (built or recursive)):
            roots.append(node)
    return roots


def _answer_size(link: exp.Expr, bounds: SearchBounds) -> exp.Expr:
    known, total = 0, []
    for leaf, times in _held(link).values():
        inner = leaf.unnest()
        if isinstance(inner, exp.Cast) and inner.to.is_type(*exp.DataType.TEXT_TYPES):
            inner = inner.this  # count(*)::text
        if (size := static_length(leaf)) is not None or plainly_scalar(inner, "text"):
            known += (size or 0) * times
            continue
        measure = bounds.value_bytes or bounds.byte_length
        total.append(exp.Mul(this=measure(leaf.copy()), expression=exp.Literal.number(times)))
    size_of: exp.Expr = exp.Literal.number(known)
    for term in total:
        size_of = term if size_of.is_int and not known else exp.Add(this=size_of, expression=term)
    return size_of


class _AnswerBound(GrowthBound):
    """A concatenation's answer: its operands, nested links opened, are what `hold` computes once."""


def answer_bound(bounds: SearchBounds) -> GrowthBound:
    """The bound of a concatenation's answer: its operands' bytes (`SearchBounds.value_bytes`)."""
    return _AnswerBound("", lambda call: _answer_size(call, bounds), bounds.chain_budget or 0)


HOLD: Final = "mcpkit_once"
"""The alias of the one-row derived table a guard computes its operands in, once."""
# Set-returning calls: in a scalar subquery they would answer several rows
_SETS: Final = frozenset(
    {"unnest", "generate_series", "generate_subscripts", "regexp_matches", "regexp_split_to_table"}
    | {"string_to_table", "json_array_elements", "jsonb_array_elements", "json_array_elements_text"}
    | {"jsonb_array_elements_text", "json_each", "jsonb_each", "json_each_text", "jsonb_each_text"}
    | {"json_object_keys", "jsonb_object_keys", "jsonb_path_query", "json_populate_recordset"}
    | {"jsonb_populate_recordset", "json_to_recordset", "jsonb_to_recordset", "explode", "posexplode"}
)
# As written: cheap to compute twice, or read by the bound itself (array_fill's ARRAY[n, m]). A
# concatenation holds its columns too: a subquery's column the planner pulls up is its expression
# again at each use (array_cat(array_cat(b, b), ...) over a derived array_fill: 1.3 GB)
_CHEAP: Final = (exp.Literal, exp.Null, exp.Star, exp.Placeholder, exp.Array, exp.Variadic)
# a window is computed over its own query's rows, a set-returning call answers rows, and an
# aggregate over no column of the query would aggregate the hold's one row
_KEPT: Final = (exp.Window, exp.Unnest, exp.Explode, exp.AggFunc, exp.Placeholder, exp.Star)


def _holdable(value: exp.Expr, varying: set[str], columns: bool) -> bool:
    inner = value.unnest()
    inner = inner.this if isinstance(inner, exp.Cast) else inner
    names = {name for n in value.walk() for name in _names(n)}
    if isinstance(inner, _CHEAP) or (isinstance(inner, exp.Column) and not columns):
        return False
    if any(value.find_all(*_KEPT)) or names & _SETS or any(n.endswith("agg") for n in names):
        return False
    return not plainly_scalar(value, "text") or bool(names & varying)  # arithmetic is cheap twice


def hold(call: exp.Expr, bound: object, bounds: SearchBounds) -> list[exp.Expr]:
    """Replace each computed operand of a builder's `call` (in place) by a column of the hold;
    the held expressions, aliased, for `wrap` (an operand written twice is held once).

    Raises:
        Refused: `function`, for an operand that cannot be held and differs per evaluation
            (random()): the guard and the call would each compute it.
    """
    if not isinstance(bound, GrowthBound) or bound.wrap_argument or not bounds.holds_operands:
        return []
    varying = set(bounds.varying)
    held: dict[str, exp.Expr] = {}
    operands = (
        [leaf for leaf, _ in _leaves(call)] if isinstance(bound, _AnswerBound) else call.iter_expressions()
    )
    for value in list(operands):
        if not _holdable(value, varying, isinstance(bound, _AnswerBound)):
            names = sorted({name for n in value.walk() for name in _names(n)} & varying)
            if names and not isinstance(value.unnest(), (*_CHEAP, exp.Column)):
                refuse(
                    "function",
                    f"A call that builds a large value (repeat, format, ...) over a value computed from"
                    f" {names[0]}() cannot be bounded, since it changes each time it is computed;"
                    " compute it in a CTE first.",
                )
            continue
        key = value.sql()
        if key not in held:
            held[key] = exp.alias_(value.copy(), f"mcpkit_v{len(held)}")
        value.replace(exp.column(held[key].alias, HOLD))
    return list(held.values())


def wrap(guard: exp.Expr, held: list[exp.Expr]) -> exp.Expr:
    """`guard` reading the held operands, as a scalar subquery computing each of them once."""
    if not held:
        return guard
    # OFFSET 0: else the planner pulls the subquery up and writes the operand back at each use
    once = exp.select(*held).offset(0)
    source = exp.Subquery(this=once, alias=exp.TableAlias(this=exp.to_identifier(HOLD)))
    return exp.Subquery(this=exp.select(guard).from_(source))
