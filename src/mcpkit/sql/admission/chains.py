"""What a concatenation chain (`a || b || c`, `concat(...)` nested) holds while it is computed, for
`bound_searches`.

PostgreSQL builds `a || b || c` as `(a || b) || c`: each step is a new value, and every value a row
builds stays until the row is done, so a chain of k operands holds about k^2/2 operands at once
(200 `||` over a 64 KB column took a backend to 1.3 GB for a 13 MB answer). A leaf counts once per
intermediate value it is part of: its depth below the chain's root, less one (the last value is the
answer, sized like any other).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from mcpkit.sql.admission.operands import plainly_scalar

__all__ = ["chain_cost", "chain_roots", "leaf_length", "unfold_constants"]

_LINKS = (exp.DPipe, exp.Concat, exp.ConcatWs)
# A chain whose computed leaves are held by at most this many intermediate values in all holds
# no more than a few nested calls would (`'%' || b || '%'`, `a || ' ' || b`): left as written.
_FEW = 3


def _link(node: exp.Expr) -> bool:
    return isinstance(node.unnest(), _LINKS)


def _leaves(link: exp.Expr, depth: int) -> Iterator[tuple[exp.Expr, int]]:
    """Each leaf under `link` (at `depth`, the root being 0) and how many intermediates hold it."""
    link = link.unnest()
    parts = [link.this, link.expression] if isinstance(link, exp.DPipe) else list(link.expressions)
    for i, part in enumerate(parts):
        if _link(part):
            yield from _leaves(part, depth + 1)
        elif isinstance(link, exp.ConcatWs) and i == 0:  # the separator, once between each two
            yield part, depth * max(len(parts) - 2, 1)
        else:
            yield part, depth


def chain_roots(tree: exp.Expr) -> list[exp.Expr]:
    """The outermost links of each chain that builds an intermediate value (two links or more)."""
    roots: list[exp.Expr] = []
    for node in tree.find_all(*_LINKS):
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if not (parent is not None and isinstance(parent, _LINKS)) and any(w for _, w in _leaves(node, 0)):
            roots.append(node)
    return roots


def chain_cost(root: exp.Expr, length: Callable[[exp.Expr], exp.Expr], budget: int) -> exp.Expr | None:
    """The condition that the intermediates of the chain at `root` pass `budget` bytes, or None
    when they cannot (literals under it, or `_FEW` computed leaves); `length`: a leaf's bytes."""
    weights: dict[exp.Expr, int] = {}  # the same leaf written again is measured once (`b || b || ...`)
    for leaf, weight in _leaves(root, 0):
        if weight and not isinstance(leaf, exp.Null):
            weights[leaf] = weights.get(leaf, 0) + weight
    known, computed, terms = 0, 0, []
    for leaf, weight in weights.items():
        size = length(leaf)
        if isinstance(size, exp.Literal):
            known += int(size.this) * weight
        else:
            computed += weight
            terms.append(size if weight == 1 else exp.Mul(this=size, expression=exp.Literal.number(weight)))
    if known > budget:
        return exp.true()
    if computed <= _FEW:
        return None
    total: exp.Expr = exp.Literal.number(known) if known else terms.pop()
    for term in terms:
        total = exp.Add(this=total, expression=term)
    return exp.GT(this=total, expression=exp.Literal.number(budget))


def unfold_constants(root: exp.Expr, varying: frozenset[str]) -> None:
    """Each leaf of the chain that reads nothing of a row becomes a scalar subquery: PostgreSQL
    folds an immutable sub-chain of constants while planning (`repeat('x', 1e6) || ...`), before
    the guard runs. A leaf that differs per evaluation (random()) or holds an aggregate or a window
    is left as written: as a subquery its value would change."""
    for leaf, _ in list(_leaves(root, 0)):
        if isinstance(leaf, exp.Literal | exp.Null) or (isinstance(leaf, exp.Cast) and leaf.this.is_leaf()):
            continue
        if any(leaf.find_all(exp.Column, exp.Query, exp.AggFunc, exp.Window, exp.Placeholder, exp.Star)):
            continue
        names = {n.name.lower() for n in leaf.find_all(exp.Anonymous)}
        for n in leaf.find_all(exp.Func):
            names.update(m.lower() for m in (n.sql_name(), *getattr(type(n), "_sql_names", ())))
        if names & varying:
            continue
        placeholder = exp.Null()
        leaf.replace(placeholder)
        placeholder.replace(exp.Subquery(this=exp.select(leaf)))


def leaf_length(leaf: exp.Expr, length: Callable[[exp.Expr], exp.Expr], not_text: frozenset[str]) -> exp.Expr:
    """A chain leaf's bytes (`length` of its text): nothing for a number, a count or a time (written
    as text or not); a leaf computed from random() is measured as any other (its length barely differs)."""
    inner = leaf.unnest()
    if isinstance(inner, exp.Cast) and inner.to.is_type(*exp.DataType.TEXT_TYPES):
        inner = inner.this
    if plainly_scalar(inner, "text", not_text):
        return exp.Literal.number(0)
    return length(leaf)
