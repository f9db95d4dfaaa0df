"""Values of the first row scanned: what a DISTINCT or grouped block reads beyond its keys.

MariaDB (and SQLite) answer, for a column that is neither a key nor aggregated, the value of the
first row the scan meets for each group or distinct value, and an index on a masked column sets
that scan order (`Profile.bare_columns`). Their ONLY_FULL_GROUP_BY looks at the select list's plain
columns only, and nothing checks a DISTINCT block's ORDER BY, so (red team rt33b):

- F6: `SELECT DISTINCT (id IN (2, 5)) AS g ... ORDER BY CASE id WHEN 2 THEN 1 ...` sorts each
  distinct value by the id of its first scanned row: `g = 1` comes first iff email(2) < email(5);
  `GROUP_CONCAT(DISTINCT x ORDER BY k)` and `JSON_ARRAYAGG(DISTINCT x ORDER BY k)` the same;
- F5: `MAX(id) OVER (PARTITION BY city) ... GROUP BY city` (a window's argument), `GROUP BY city
  ORDER BY id LIMIT 1` answer the id of the smallest e-mail per city.

`first_scanned` names the first such read of a query (for the stored-view check); `refuse_first_scanned`
refuses it (the per-call analysis, on the qualified tree). What counts:

- a grouped block (GROUP BY, an aggregate of its own, or HAVING): a column of its rows read in its
  select list (window arguments, PARTITION BY and ORDER BY included), HAVING, ORDER BY or a named
  WINDOW, that is neither a GROUP BY key (or inside one; `GROUP BY 1` is its output) nor inside
  an aggregate of the block;
- a DISTINCT block: an ORDER BY key that reads a column, an aggregate or a window other than
  through one of its outputs (an ordinal or an output alias names an output);
- an aggregate with DISTINCT and an ORDER BY inside: an order key that reads a column other than
  through one of the DISTINCT arguments.

A name with no qualifier is a column of the innermost block, except an output alias in ORDER BY or
HAVING (MariaDB's stored view text qualifies every column). PostgreSQL enforces all three itself.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.masking.alias_scope import pinned_columns
from mcpkit.sql.masking.schema import KnownSchema
from mcpkit.sql.masking.ties import (
    _CALL_WRAPPERS,
    _aggregated,
    _outer_reference,
    aggregate_block,
    is_aggregate,
    refuse_order,
)
from mcpkit.sql.profiles import profile_class

__all__ = ["first_scanned", "fix_hint", "refuse_first_scanned"]

_BARE: Final = (
    "Over a table with masked columns, every selected column of a grouped query must be grouped "
    "or aggregated: a bare column takes its value from a row the storage order picks."
)
_DISTINCT: Final = (
    "Over a table with masked columns, a DISTINCT query may order only by what it selects: any "
    "other value is taken from a row the storage order picks."
)
_AGG_DISTINCT: Final = (
    "Over a table with masked columns, an aggregate with DISTINCT may order only by its own "
    "arguments: any other value is taken from a row the storage order picks."
)


def _mine(col: exp.Column, select: exp.Select) -> bool:
    """Whether `col` reads a row of `select` (a qualified name: its sources, directly or correlated)."""
    if isinstance(col.this, exp.Star):
        return False
    if col.table:
        return _outer_reference(col, select)
    return col.find_ancestor(exp.Select) is select


def _aliases(select: exp.Select) -> set[str]:
    return {e.alias.casefold() for e in select.selects if isinstance(e, exp.Alias)}


def _named_output(node: exp.Expr, select: exp.Select) -> bool:
    """An ORDER BY / HAVING item naming an output: an ordinal, or an output alias alone."""
    if isinstance(node, exp.Literal) and node.is_int and node.arg_key == "this":
        return isinstance(node.parent, exp.Ordered) and node.parent.parent is select.args.get("order")
    return isinstance(node, exp.Column) and not node.table and node.name.casefold() in _aliases(select)


def _beyond(node: exp.Expr, select: exp.Select, outputs: set[str], names_outputs: bool) -> exp.Expr | None:
    """The first column of `select`'s rows, aggregate or window of `select` that `node` reads other
    than inside an expression of `outputs`; None."""
    if node.sql() in outputs or (names_outputs and _named_output(node, select)):
        return None
    if isinstance(node, exp.Column):
        return node if _mine(node, select) else None
    call = node
    while isinstance(call, _CALL_WRAPPERS):
        call = call.this
    if is_aggregate(call) and aggregate_block(call) is select:
        return node
    if isinstance(node, exp.Window) and node.find_ancestor(exp.Select) is select:
        return node
    for child in node.iter_expressions():
        found = _beyond(child, select, outputs, names_outputs)
        if found is not None:
            return found
    return None


def _grouped(select: exp.Select) -> str | None:
    group = select.args.get("group")
    if group is None and not _aggregated(select):
        return None
    keys: set[str] = set()
    for key in group.expressions if isinstance(group, exp.Group) else []:
        keys.add(key.sql())
        if isinstance(key, exp.Literal) and key.is_int and 0 < int(key.name) <= len(select.selects):
            keys.add(select.selects[int(key.name) - 1].unalias().sql())  # GROUP BY 1
    places: list[tuple[exp.Expr | None, bool]] = [(s, False) for s in select.selects]
    places += [(select.args.get("having"), True), (select.args.get("order"), True)]
    places += [(w, False) for w in select.args.get("windows") or []]
    for place, names_outputs in places:
        if place is None:
            continue
        for col in place.find_all(exp.Column):
            if not _mine(col, select) or (names_outputs and _named_output(col, select)):
                continue
            node: exp.Expr | None = col
            covered = False
            while node is not None and node is not select:
                call = node
                while isinstance(call, _CALL_WRAPPERS):
                    call = call.this
                if node.sql() in keys or (is_aggregate(call) and aggregate_block(call) is select):
                    covered = True
                    break
                node = node.parent
            if not covered:
                return f"bare column {col.sql()} in a grouped block"
    return None


def _distinct(select: exp.Select) -> str | None:
    distinct, order = select.args.get("distinct"), select.args.get("order")
    if not isinstance(distinct, exp.Distinct) or distinct.args.get("on") is not None or order is None:
        return None
    outputs = {s.unalias().sql() for s in select.selects}
    for ordered in order.expressions:
        key = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        found = _beyond(key, select, outputs, True)
        if found is not None:
            return f"DISTINCT block ordered by {found.sql()[:60]}, which it does not select"
    return None


def _distinct_arguments(order: exp.Order) -> set[str] | None:
    """The DISTINCT arguments of an aggregate's inner ORDER BY (`GROUP_CONCAT(DISTINCT a, b ORDER BY
    k)`), each and their concatenation; None: not an aggregate's ORDER BY over DISTINCT."""
    if not isinstance(order.this, exp.Distinct):
        return None
    out: set[str] = set()
    for arg in order.this.expressions:
        out.add(arg.sql())
        if isinstance(arg, exp.Concat):
            out |= {a.sql() for a in arg.expressions}
    return out


def first_scanned(tree: exp.Expr, dialect: str, written: KnownSchema | None = None) -> str | None:
    """The first read of `tree` whose value is the first scanned row's (module doc), described;
    None, also on an engine that refuses such reads itself (PostgreSQL).

    `written`: the schema of stored SQL as written (SQLite keeps a view's text so), where a name
    inside an ORDER BY expression or GROUP BY that is both an output alias and a column is not yet
    resolved: read as the column the engine reads there (`alias_scope`; red team rt35b F3).
    """
    if not profile_class(dialect).bare_columns:
        return None
    if written is not None:
        tree = tree.copy()
        ambiguous = pinned_columns(tree, dialect, written)
        if ambiguous is not None:
            return ambiguous
    for select in tree.find_all(exp.Select):
        found = _grouped(select) or _distinct(select)
        if found:
            return found
    for order in tree.find_all(exp.Order):
        arguments = _distinct_arguments(order)
        if arguments is None:
            continue
        for ordered in order.expressions:
            key = ordered.this if isinstance(ordered, exp.Ordered) else ordered
            for col in key.find_all(exp.Column):
                if not any(n.sql() in arguments for n in (col, *_up_to(col, key))):
                    return (
                        f"aggregate with DISTINCT ordered by {col.sql()}, which is not one of its arguments"
                    )
    return None


def _up_to(node: exp.Expr, stop: exp.Expr) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    parent = node.parent
    while parent is not None and node is not stop:
        out.append(parent)
        if parent is stop:
            break
        node, parent = parent, parent.parent
    return out


_FIXES: Final = (
    ("bare column", "group by that column too or aggregate it (for example GROUP BY g ORDER BY MIN(k))"),
    ("DISTINCT block", "order its DISTINCT only by what it selects (an output, its alias or its ordinal)"),
    ("aggregate with DISTINCT", "order the aggregate only by its DISTINCT arguments"),
)


def fix_hint(reason: str) -> str | None:
    """The way out of a stored query's finding whose reason is `first_scanned`'s (an ORDER BY on the
    primary key does not help there); None: another reason."""
    return next((hint for start, hint in _FIXES if reason.startswith(start)), None)


def refuse_first_scanned(qualified: exp.Expr, dialect: str) -> None:
    """Refuse a query over a masked read that reads a first scanned row's value (`first_scanned`)."""
    found = first_scanned(qualified, dialect)
    if found is None:
        return
    if found.startswith("bare column"):
        refuse_order(_BARE, found)
    refuse_order(_AGG_DISTINCT if found.startswith("aggregate") else _DISTINCT, found)
