"""Subqueries that stop at their first match: read in a visible order over masked reads.

`EXISTS (q)` is an implicit `LIMIT 1`, and `x IN (q)`, `x = ANY (q)`, `x > ALL (q)` stop at the first
row deciding them (per outer row, for a subplan or MariaDB's FirstMatch). Which rows of q were
evaluated before that follows the scan order, which an index, CLUSTER or a partitioning can make
follow a masked value: an error q raises on row b, answered or not, told whether row a was scanned
first (red team rt35a F8: `EXISTS (SELECT 1 FROM customers WHERE CASE WHEN id = a THEN true WHEN
id = b THEN 1 / (id - b) = 1 ELSE false END)` sorted the masked e-mails in n log n calls).

So such a block is read in a total visible order, as a limited block is (`limits`): ordered by its
outputs and the visible columns of its rows, EXISTS with `LIMIT 1` (and `OFFSET 0` where the engine
drops an ORDER BY with a constant LIMIT inside EXISTS; SQLite reads it from a derived table,
`_EXISTS_ORDER_KEPT_BY`); an IN / ANY / ALL
block is ordered where the engine keeps that order (`_SET_KEEPS_ORDER`; MariaDB drops it: refused).
A block whose every per-row expression is a plain comparison of columns and constants (`_plain`)
raises nothing per row on PostgreSQL and SQLite, so stays as written (the common correlated
`EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)` keeps its semi-join; ordered, it ran
once per outer row). MariaDB turns a per-row conversion warning of a plain comparison (`name = 0`)
into an error, so there every EXISTS block is ordered; an IN / ANY / ALL block it cannot order is
refused unless plain (residual: a plain comparison across types there, docs/masking.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.budget import NodeAllowance
from mcpkit.sql.masking.conversions import converts_per_row
from mcpkit.sql.masking.first_row import cte_for
from mcpkit.sql.masking.limits import Keyed
from mcpkit.sql.masking.order import ordinals, output_width, row_order
from mcpkit.sql.masking.ties import BLOCK, refuse_order

__all__ = ["pin_early_stops"]

# Per dialect: how `EXISTS (q ORDER BY k LIMIT 1)` is run in that order. PostgreSQL's
# simplify_EXISTS_query drops ORDER BY and a constant LIMIT (OFFSET 0 stops it); SQLite drops the
# ORDER BY inside EXISTS (but keeps a derived table's: `EXISTS (SELECT 1 FROM (q ...) AS s)`).
_EXISTS_ORDER_KEPT_BY: Final = {"postgres": "offset", "mysql": "as written", "sqlite": "derived table"}
_DERIVED: Final = "mcpkit_first"
# Whether an ORDER BY inside `x IN (q)` / ANY / ALL is kept (PostgreSQL sorts; SQLite materialises
# the list; MariaDB removes it, and allows no LIMIT there).
_SET_KEEPS_ORDER: Final = {"postgres": True, "mysql": False, "sqlite": True}
# Whether a plain comparison of columns and constants can fail per row (MariaDB: a conversion warning).
_PLAIN_MAY_FAIL: Final = {"postgres": False, "mysql": True, "sqlite": False}


def _as_written(select: exp.Select, stop: str, dialect: str, views: frozenset[str]) -> bool:
    """A plain block stays as written, except where a plain comparison may fail per row: EXISTS is
    ordered there, and an IN / ANY / ALL block (which cannot be) only if no comparison in it, nor
    the one of its outputs with the left operand, converts a value (red team rtB F1)."""
    if not _plain(select, views):
        return False
    if not _PLAIN_MAY_FAIL.get(dialect, True):
        return True
    if stop == "exists":
        return False
    outer = _outer(select)
    nodes = (n for key, value in select.args.items() for v in _listed(value) for n in _walk(v, key))
    return outer is not None and not converts_per_row(select, nodes, outer)


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def _outer(node: exp.Expr) -> exp.Expr | None:
    """The left operand an IN / ANY / ALL subquery's outputs (each UNION branch's) are compared with
    (None: not found)."""
    parent = node.parent
    while isinstance(parent, exp.Subquery | exp.SetOperation):
        node, parent = parent, parent.parent
    operand: object = None
    if isinstance(parent, exp.In):
        operand = parent.this
    elif isinstance(parent, exp.Any | exp.All) and isinstance(parent.parent, exp.Binary):
        comparison = parent.parent
        operand = comparison.this if comparison.expression is parent else None
    return operand if isinstance(operand, exp.Expr) else None


_PLAIN_NODES: Final = (
    exp.Column,
    exp.Identifier,
    exp.Star,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.And,
    exp.Or,
    exp.Not,
    exp.EQ,
    exp.NEQ,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Is,
    exp.LT,
    exp.LTE,
    exp.GT,
    exp.GTE,
    exp.Between,
    exp.In,
    exp.Placeholder,
    exp.Parameter,
    exp.Table,
    exp.TableAlias,
    exp.From,
    exp.Join,
    exp.Where,
    exp.Alias,
    exp.Tuple,
)

_SET_UNORDERED: Final = (
    "Over a table with masked columns, an IN, ANY or ALL subquery that computes per row (a function, "
    "arithmetic, CASE, a cast, a nested query, or a comparison across types such as text with a number) "
    "is not answered on this database: the rows it reads before its first match follow the storage "
    "order; compare plain columns of one type, or join."
)
_STAR: Final = (
    "Over a table with masked columns, an EXISTS, IN, ANY or ALL subquery that computes per row must "
    "select columns by name: write SELECT 1 (or the columns) instead of *."
)
_SET_OPERATION: Final = (
    "Over a table with masked columns, an EXISTS, IN, ANY or ALL subquery over UNION, INTERSECT or "
    "EXCEPT whose branches compute per row is not answered: the rows read before its first match "
    "follow the storage order; compare plain columns in each branch, or write one subquery per branch."
)
_UNKEYED: Final = (
    "Over a table with masked columns, an EXISTS, IN, ANY or ALL subquery that computes per row needs "
    "rows told apart by visible columns: select a unique visible key such as the primary key."
)


def _stop(node: exp.Expr) -> str | None:
    """'exists' or 'set' for the query of an EXISTS or of an IN / ANY / ALL subquery, else None."""
    parent = node.parent
    while isinstance(parent, exp.Subquery):
        node, parent = parent, parent.parent
    if isinstance(parent, exp.Exists):
        return "exists"
    if isinstance(parent, exp.In) and node.arg_key == "query":
        return "set"
    if isinstance(parent, exp.Any | exp.All):
        return "set"
    return None


def _plain(select: exp.Select, views: frozenset[str]) -> bool:
    """Whether every expression `select` evaluates per row is a comparison of columns and constants,
    over base tables only (a view's or a CTE's columns may compute per row: `1 / (id - b) AS x`).
    An ORDER BY without LIMIT is left out: it is dropped, or it sorts every row (an error then fails
    whatever the order); ordering passes before this one add one to `IN ((SELECT ...))`."""
    if any(select.args.get(k) for k in ("group", "having", "limit", "offset", "distinct")):
        return False
    for key, value in select.args.items():
        for node in (n for v in (value if isinstance(value, list) else [value]) for n in _walk(v, key)):
            if isinstance(node, exp.Query) or not isinstance(node, _PLAIN_NODES):
                return False
            if isinstance(node, exp.Table) and (
                not isinstance(node.this, exp.Identifier) or node.name.casefold() in views or cte_for(node)
            ):
                return False
    return True


def _walk(value: object, key: str) -> Iterator[exp.Expr]:
    return value.walk() if isinstance(value, exp.Expr) and key != "order" else iter(())


def _pin(select: exp.Select, stop: str, dialect: str, keyed: Keyed, room: NodeAllowance) -> None:
    if keyed.get(select.meta.get(BLOCK, -1), []) is None:
        refuse_order(_UNKEYED, f"{stop} subquery over rows no visible column tells apart")
    if stop == "set" and not _SET_KEEPS_ORDER.get(dialect, False):
        refuse_order(_SET_UNORDERED, "IN/ANY/ALL subquery computing per row, where its ORDER BY is dropped")
    order = select.args.get("order")
    written: list[exp.Expr] = list(order.expressions) if order is not None else []
    count = output_width(select)
    if count is None:  # the star's columns count as outputs, which a star cannot be ordered by (review)
        refuse_order(_STAR, f"{stop} subquery computing per row selects a star")
    added = ordinals(select, count, dialect) if count else []
    added += row_order(select, keyed, dialect)
    seen = {e.sql() for e in written}
    added = [a for a in added if a.sql() not in seen]
    room.add(added, "masking's tie-breakers")
    if written or added:
        select.set("order", exp.Order(expressions=[*written, *added]))
    if stop == "exists":
        if select.args.get("limit") is None:
            select.set("limit", exp.Limit(expression=exp.Literal.number(1)))
        kept_by = _EXISTS_ORDER_KEPT_BY.get(dialect, "offset")
        if kept_by == "offset" and select.args.get("offset") is None:
            select.set("offset", exp.Offset(expression=exp.Literal.number(0)))
        elif kept_by == "derived table":  # moved, not copied: a nested block is pinned in place later
            derived = exp.Subquery(alias=exp.TableAlias(this=exp.to_identifier(_DERIVED)))
            select.replace(exp.select("1").from_(derived, copy=False))
            derived.set("this", select)


def pin_early_stops(
    tree: exp.Expr, dialect: str, keyed: Keyed, room: NodeAllowance, views: frozenset[str]
) -> bool:
    """Order every EXISTS / IN / ANY / ALL subquery block of a masked read that may raise per row
    (module doc), in place; True if any changed. A set operation there is refused unless plain.
    `views`: the names of views (case-folded), whose columns may compute per row."""
    pinned = False
    for node in list(tree.find_all(exp.Select, exp.SetOperation)):
        stop = _stop(node)
        if stop is None:
            continue
        if isinstance(node, exp.SetOperation):
            if all(_as_written(s, stop, dialect, views) for s in node.find_all(exp.Select)):
                continue
            refuse_order(_SET_OPERATION, f"set operation under {stop} computing per row")
        assert isinstance(node, exp.Select)
        if _as_written(node, stop, dialect, views):
            continue
        _pin(node, stop, dialect, keyed, room)
        pinned = True
    return pinned
