"""Rewrite: each window that names a WINDOW clause's definition is written inline, before the analysis.

`sum(x) OVER w ... WINDOW w AS (PARTITION BY a ORDER BY b)` is `sum(x) OVER (PARTITION BY a ORDER
BY b)`: the masking rules (ties, sums, order) complete or refuse windows written inline, and refused
every order-dependent function over a named one, which they cannot rewrite. Inlined, each use is
checked and completed by the same rules as the query written inline (`docs/masking.md`).

The copy follows the standard, as PostgreSQL, MariaDB and SQLite do: `OVER w` is w's whole
definition, frame included; `OVER (w ...)` and `WINDOW w2 AS (w ...)` take w's PARTITION BY and ORDER
BY, and add an ORDER BY (when w has none) and a frame (when w has none) of their own. A definition
names only one before it. Names are matched caselessly. A block where any of this does not hold (an
unknown or repeated name, an override the engines refuse) is left as written: the rules refuse it
or the database does.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlglot import exp

__all__ = ["inline_windows"]


class _Spec(NamedTuple):
    partition: list[exp.Expr]
    order: exp.Order | None
    frame: exp.WindowSpec | None


def inline_windows(tree: exp.Expr) -> exp.Expr:
    """`tree`, or a copy with every use of a named window written inline and the WINDOW clauses dropped.

    >>> import sqlglot
    >>> sql = "SELECT rank() OVER (w ROWS UNBOUNDED PRECEDING) FROM t WINDOW w AS (PARTITION BY a ORDER BY b)"
    >>> inline_windows(sqlglot.parse_one(sql)).sql()
    'SELECT RANK() OVER (PARTITION BY a ORDER BY b ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM t'
    """
    if not any(s.args.get("windows") for s in tree.find_all(exp.Select)):
        return tree
    tree = tree.copy()
    for select in [s for s in tree.find_all(exp.Select) if s.args.get("windows")]:
        _inline(select)
    return tree


def _inline(select: exp.Select) -> None:
    defined: dict[str, _Spec] = {}
    for definition in select.args["windows"]:
        name = definition.this.name.casefold()
        spec = _resolved(definition, defined)
        if name in defined or spec is None:
            return
        defined[name] = spec
    uses: list[tuple[exp.Window, _Spec]] = []
    for window in select.find_all(exp.Window):
        if window.parent is select and window.arg_key == "windows":
            continue
        if window.find_ancestor(exp.Select) is not select or window.args.get("alias") is None:
            continue  # a subquery's window, or one written inline
        spec = _resolved(window, defined)
        if spec is None:
            return
        uses.append((window, spec))
    for window, spec in uses:
        window.set("alias", None)
        window.set("partition_by", [p.copy() for p in spec.partition] or None)
        window.set("order", spec.order.copy() if spec.order is not None else None)
        window.set("spec", spec.frame.copy() if spec.frame is not None else None)
    select.set("windows", None)


def _resolved(window: exp.Window, defined: dict[str, _Spec]) -> _Spec | None:
    """The inline form of `window` given the definitions before it, or None: not one to inline."""
    partition = list(window.args.get("partition_by") or [])
    order = window.args.get("order")
    frame = window.args.get("spec")
    base_name = window.args.get("alias")
    if base_name is None:
        return _Spec(partition, order, frame)
    base = defined.get(base_name.name.casefold())
    if base is None:
        return None
    if not partition and order is None and frame is None:
        return base  # `OVER w`: the whole definition, its frame too
    if partition or (order is not None and base.order is not None) or base.frame is not None:
        return None  # the engines refuse to override these
    return _Spec(base.partition, order if order is not None else base.order, frame)
