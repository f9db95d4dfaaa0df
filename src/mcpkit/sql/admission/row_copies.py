"""How many copies of one value a row holds through whole-row references, for `compute_once`.

A whole-row reference (`SELECT s AS x, s AS y FROM (...) s`) copies every output of `s` into a new
row value, and a row of rows copies them again: each level that reads the row below twice doubles
the value, with no call a size guard sees (red team rt19pg F2: rows of rows took a backend to
21.7 GB, OOM-killed; six levels over a 100 KB value: 6.4 MB answered, the backend at 120 MB).
Row values an analyst builds (`to_jsonb(t)`, `SELECT s, to_jsonb(s)`) hold a value once or twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Final

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

__all__ = ["MAX_ROW_COPIES", "row_copies"]

MAX_ROW_COPIES: Final = 8
"""Copies of one output a row value may hold through nested whole-row references."""

_Leaves = Counter[tuple[int, str]]
_Resolve = Callable[[Scope, exp.Column], list[tuple[Scope, str]]]


class _Rows:
    def __init__(self, resolve: _Resolve) -> None:
        self.resolve = resolve
        self.outputs: dict[int, dict[str, tuple[_Leaves, bool]]] = {}  # per SELECT: leaves, holds rows

    def whole(self, source: Scope) -> _Leaves:
        total: _Leaves = Counter()
        for leaves, _ in self.outputs.get(id(source.expression), {}).values():
            total.update(leaves)
        return total

    def item(self, scope: Scope, value: exp.Expr) -> tuple[_Leaves, bool]:
        """The values an output holds through whole-row references, and whether it holds any."""
        found: _Leaves = Counter()
        for node in value.walk(prune=lambda n: isinstance(n, exp.Query) and n is not value):
            if isinstance(node, exp.Query) and node is not value:  # a scalar subquery: its output
                for leaves, rows in self.outputs.get(id(node), {}).values():
                    found.update(leaves if rows else Counter())
                continue
            if not isinstance(node, exp.Column):
                continue
            for source, name in self.resolve(scope, node):
                if name == "*":
                    found.update(self.whole(source) or Counter({(id(source.expression), name): 1}))
                    continue
                leaves, rows = self.outputs.get(id(source.expression), {}).get(name, (Counter(), False))
                if rows:
                    found.update(leaves)
        return found, bool(found)


def row_copies(root: Scope, resolve: _Resolve) -> int:
    """The most copies of one output any row value of the query holds through whole-row references
    (1 for none); `resolve` maps a column to the sources and outputs it reads."""
    rows = _Rows(resolve)
    worst = 1
    for scope in root.traverse():  # sources before the queries that read them
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        outputs: dict[str, tuple[_Leaves, bool]] = {}
        for item in select.selects:
            name = item.alias_or_name.casefold()
            leaves, held = rows.item(scope, item.unalias())
            if not held:
                leaves = Counter({(id(select), name): 1})
            outputs[name] = (leaves, held)
            worst = max(worst, *leaves.values())
        rows.outputs[id(select)] = outputs
    return worst
