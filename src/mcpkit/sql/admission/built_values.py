"""Values that builders make, for `bound_searches`: the concatenations whose answer multiplies
their operands, and guards that compute a builder's operands once.

`s || s`, `concat(x, x)`, `array_cat(a, a)` and `concat_ws(sep, ...)` (its separator once between
each two values) answer several times their operands, and a recursive CTE doubles them at each
step (red team pg17 F1: 27 steps of `s || s` took a backend to 1.6 GB; `array_cat(a, a)` three
times over a 60 MB array 1.1 GB). Their answer is capped like a builder's (`answer_bound`): when
an operand appears twice, when one holds a call that builds (repeat, format, a subquery, an
aggregate...), or inside WITH RECURSIVE. A concatenation of plain columns is left as written.

A computed operand of a guarded builder, and each operand of a guarded concatenation, is computed
once for the guard and the call (`hold`, through `admission.held_operands`).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from mcpkit.sql.admission import held_operands
from mcpkit.sql.admission.function_tables import GrowthBound, SearchBounds
from mcpkit.sql.admission.held_operands import call_names
from mcpkit.sql.admission.operands import arguments, plainly_scalar, static_length

__all__ = ["answer_bound", "answer_roots", "builds", "hold"]

_LINKS = (exp.DPipe, exp.Concat, exp.ConcatWs, exp.ArrayConcat, exp.ArrayAppend, exp.ArrayPrepend)


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


def builds(leaf: exp.Expr, builders: Collection[str]) -> bool:
    """A subquery, a collecting aggregate (`*_agg`, group_concat) or a builder under `leaf`."""
    names = {name for n in leaf.walk() for name in call_names(n)}
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
        built = any(builds(leaf, bounds.growths) for leaf, _ in held.values())
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


def hold(call: exp.Expr, bound: object, bounds: SearchBounds) -> list[exp.Expr]:
    """Hold each computed operand of a builder's `call` (a concatenation's: each operand, nested
    links opened) in place, for `held_operands.wrap`; none for another bound.

    Raises:
        Refused: `function`, for an operand that cannot be held and differs per evaluation.
    """
    if not isinstance(bound, GrowthBound) or bound.wrap_argument or not bounds.holds_operands:
        return []
    answer = isinstance(bound, _AnswerBound)
    operands = [leaf for leaf, _ in _leaves(call)] if answer else list(call.iter_expressions())
    return held_operands.hold(operands, bounds.varying)
