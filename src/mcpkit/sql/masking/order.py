"""Make an answer over a masked read depend on the visible values only, never on the scan order.

An index on a masked column (or CLUSTER, or the order rows were written in) makes the engine
scan in the order of the hidden values. Whatever follows the scan order then leaks that order:
the rows' order, which rows a LIMIT keeps, the row DISTINCT ON keeps, a window's numbering or
offsets within ties, the order of a concatenating aggregate, a bare column beside GROUP BY.

    qualified tree + Taint --window_keys--> per window: visible tie-breakers (or refused)
                           --refuse_bare_columns (`Profile.bare_columns`: SQLite, MySQL)
    work tree --pin_order--> ORDER BYs completed, windows and aggregates ordered (or refused)

Blocks are every Select, set operation and parenthesised query (LIMIT/OFFSET/FETCH may hang on any of
them), scalar subqueries included (SQLite: their first row). Tie-breakers are every output (ordinals) of a
block, and for a window every visible column of the rows it numbers (or a grouped block's GROUP BY keys):
rows still tied are equal in all the query can see, so swapping them changes nothing.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from mcpkit.sql.admission.budget import NodeAllowance
from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.masking.concat_args import positional as positional_args
from mcpkit.sql.masking.concat_args import split
from mcpkit.sql.masking.limits import Keyed, row_keys
from mcpkit.sql.masking.set_rows import set_returning
from mcpkit.sql.masking.sums import pin_sums
from mcpkit.sql.masking.taint import refuse_mask
from mcpkit.sql.masking.ties import (
    BLOCK,
    CONCAT,
    CONCAT_NAMES,
    CONCAT_UNORDERED,
    EXACT,
    OBJECT_NAMES,
    WIN,
    is_aggregate,
    output_keys,
    plain_type,
    refuse_bare_columns,
    refuse_order,
    refuse_pick,
    window_keys,
)
from mcpkit.sql.profiles import profile_class

__all__ = ["BLOCK", "EXACT", "WIN", "ordinals", "output_width", "pin_order", "plain_type"]
__all__ += ["refuse_bare_columns", "row_order", "window_keys"]

_TIES: Final = "masking's tie-breakers"


def _small(dialect: str) -> bool:
    return Dialect.get_or_raise(sent_dialect(dialect)).NULL_ORDERING == "nulls_are_small"


def _ordered(node: exp.Expr, dialect: str) -> exp.Ordered:
    # The dialect's own NULL placement, so no NULLS FIRST/LAST is written (MariaDB has none).
    return exp.Ordered(this=node, nulls_first=_small(dialect))


def ordinals(node: exp.Expr, width: int, dialect: str) -> list[exp.Ordered]:
    """The first `width` outputs of `node` as ORDER BY keys (the dialect's NULL placement)."""
    return [_ordered(k, dialect) for k in output_keys(node, width, dialect)]


def _exact(node: exp.Expr, dialect: str) -> list[exp.Expr]:
    """Tie-breakers that tell apart values which compare equal but print differently
    (`Profile.exact_ties`: MariaDB's collations ignore case and trailing spaces, SQLite's NOCASE
    ignores case and 1 = 1.0, PostgreSQL's numeric 1.0 = 1.00): ordered by the value alone, such
    rows keep the scan order.
    """
    return profile_class(dialect).exact_ties(node)


def _ties(node: exp.Expr, dialect: str, *, exact: bool = True) -> list[exp.Ordered]:
    """`node` as a tie-breaker, then its exact forms (`_exact`)."""
    exact = exact and node.meta.get(EXACT, True) and not isinstance(node, exp.Literal)
    extra = _exact(node, dialect) if exact else []
    return [_ordered(node.copy(), dialect), *(_ordered(e, dialect) for e in extra)]


# Outputs whose expression is not repeated as a tie-breaker: grouping, windows, subqueries
# (cost, and where a repeated expression may not be allowed), masked outputs (typed NULLs).
_NOT_REPEATED: Final = (exp.AggFunc, exp.Window, exp.Subquery, exp.Select, exp.Exists, exp.Star, exp.Null)


def _exact_outputs(node: exp.Select, dialect: str) -> list[exp.Ordered]:
    """Exact tie-breakers for the outputs of a block without DISTINCT (which allows ORDER BY
    expressions): a plain column not of a plain type, or an expression repeated (`CASE ...`)."""
    if node.args.get("distinct") is not None:
        return []
    out: list[exp.Ordered] = []
    for projection in node.selects:
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, exp.Column):
            if isinstance(value.this, exp.Star) or not value.meta.get(EXACT, True):
                continue
        elif isinstance(value, exp.Literal) or any(
            isinstance(n, _NOT_REPEATED) or (isinstance(n, exp.Anonymous) and is_aggregate(n))
            for n in value.walk()
        ):
            continue
        out += [_ordered(e, dialect) for e in _exact(value, dialect)]
    return out


def _in_array(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Subquery):
        parent = parent.parent
    return isinstance(parent, exp.Array)


def output_width(node: exp.Select | exp.SetOperation) -> int | None:
    """How many outputs `node` has (None with a star among them)."""
    return None if any(p.is_star for p in node.selects) else len(node.selects)


def _unwrap(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Subquery):
        node = node.this
    return node


# Where a parenthesised query is a set of rows (or its order cannot matter), not one value.
_NOT_SCALAR: Final = (exp.From, exp.Join, exp.Lateral, exp.CTE, exp.SetOperation, exp.In)
_NOT_SCALAR_TOO: Final = (exp.Exists, exp.Any, exp.All, exp.Array, exp.Table)


def _one_row(node: exp.Expr) -> bool:
    """A SELECT that answers one row at most, so has no order to pin (and ordering by its values
    fails for a type without one, json): no FROM, or only a derived table that is itself one row
    (a guard's `(SELECT <guard> FROM (SELECT <operand> OFFSET 0) AS h)`, `admission.held_operands`);
    no join, GROUP BY (grouping sets answer several rows) or set-returning call of its own (rt27 F9)."""
    if not isinstance(node, exp.Select) or node.args.get("joins") or node.args.get("group"):
        return False
    own = node.walk(prune=lambda n: n is not node and isinstance(n, exp.Query))
    if any(set_returning(n) for n in own):
        return False
    source = node.args.get("from_")
    if source is None:
        return True
    return isinstance(source.this, exp.Subquery) and _one_row(source.this.this)


def _scalar(node: exp.Expr) -> bool:
    """A block that is the value of a scalar subquery: SQLite answers its first row.

    `x IN (SELECT ...)` is a set; an element of an IN list is one value, `x IN ((SELECT ...),
    -1)`, and so is SQLite's `x IN ((SELECT ...))` (PostgreSQL and MariaDB read a set there:
    ordering it changes nothing). Red team rt19lite F8.
    """
    parent = node.parent
    if not isinstance(parent, exp.Subquery):
        return False
    nested = False
    while isinstance(parent.parent, exp.Subquery):
        parent, nested = parent.parent, True
    outer = parent.parent
    if isinstance(outer, exp.In):
        return nested or parent.arg_key != "query"
    return outer is not None and not isinstance(outer, _NOT_SCALAR + _NOT_SCALAR_TOO)


def _lower_limit(node: exp.Subquery) -> None:
    """`(Q) LIMIT n` is `Q LIMIT n` when Q has no LIMIT of its own: move it in, so Q's ORDER BY
    (completed with its outputs) decides which rows it keeps."""
    inner = node.this
    if node.args.get("order") is not None or not isinstance(inner, exp.Select | exp.SetOperation):
        return
    if inner.args.get("limit") is not None or inner.args.get("offset") is not None:
        return
    for key in ("limit", "offset"):
        value = node.args.get(key)
        if value is not None:
            node.set(key, None)
            inner.set(key, value)


def row_order(select: exp.Select, keyed: Keyed, dialect: str) -> list[exp.Ordered]:
    """`limits.row_keys` in their exact forms alone (a json column has no ordering; its text has)."""
    out: list[exp.Ordered] = []
    for key in row_keys(select, keyed):
        exact = _exact(key, dialect) if key.meta.get(EXACT, True) else []
        out += [_ordered(e, dialect) for e in exact or [key.copy()]]
    return out


def _sorted_rollup(node: exp.Select | exp.SetOperation, dialect: str) -> bool:
    group = node.args.get("group")
    return group is not None and bool(group.args.get("rollup")) and profile_class(dialect).rollup_in_key_order


_WITH_TIES: Final = (
    "Over a table with masked columns or a view, FETCH ... WITH TIES is not answered: number the rows "
    "with rank() OVER (ORDER BY ...) in a derived table and keep those up to the count instead."
)


def _with_ties(fetch: exp.Fetch) -> bool:
    options = fetch.args.get("limit_options")
    return isinstance(options, exp.Expr) and bool(options.args.get("with_ties"))


def _pin_blocks(tree: exp.Expr, width: int, dialect: str, keyed: Keyed, room: NodeAllowance) -> bool:
    """Every block whose rows or order reach the answer: ORDER BY completed with its outputs.

    Every Select, set operation and parenthesised query is visited (LIMIT/OFFSET/FETCH hang on
    any of them); an unparenthesised set-operation branch with DISTINCT ON is parenthesised to
    carry its own ORDER BY.
    """
    pinned = False
    if any(_with_ties(f) for f in tree.find_all(exp.Fetch)):
        # its rows are every row tied on the written keys: a tie-breaker kept one of them (rtA L1)
        refuse_mask("FETCH ... WITH TIES over a masked read", message=_WITH_TIES)
    blocks = [tree, *(n for n in tree.find_all(exp.Select, exp.SetOperation, exp.Subquery) if n is not tree)]
    for node in blocks:
        top = node is tree
        if isinstance(node, exp.Subquery):
            _lower_limit(node)
            limited = node.args.get("limit") is not None or node.args.get("offset") is not None
            if not (top or limited or node.args.get("order") is not None):
                continue
            inner = _unwrap(node)
            if not isinstance(inner, exp.Select | exp.SetOperation):
                refuse_mask("LIMIT on a parenthesised query of unknown shape", unchecked=True)
            count = width if top else output_width(inner)
            if count is None:
                refuse_mask("LIMIT over * in a parenthesised subquery: unordered", unchecked=True)
            order = node.args.get("order")
            written = list(order.expressions) if order is not None else []
            if count:
                added = ordinals(node, count, dialect)
                room.add(added, _TIES)
                node.set("order", exp.Order(expressions=[*written, *added]))
                pinned = True
            continue
        if not isinstance(node, exp.Select | exp.SetOperation):
            continue
        order = node.args.get("order")
        if _one_row(node) or (order is None and _sorted_rollup(node, dialect)):
            continue
        limited = node.args.get("limit") is not None or node.args.get("offset") is not None
        distinct = node.args.get("distinct") if isinstance(node, exp.Select) else None
        on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
        if not top and isinstance(node.parent, exp.SetOperation):
            if on is None:
                continue  # an unparenthesised set-operation branch: ordered as a whole above
            wrapper = exp.Subquery()
            node.replace(wrapper)
            wrapper.set("this", node)
        scalar = _scalar(node)
        if not (top or order is not None or limited or on is not None or scalar or _in_array(node)):
            continue
        count = width if top else output_width(node)
        if count is None:
            if order is not None and not limited and on is None and not scalar and not _in_array(node):
                continue  # an ORDER BY of a derived table without LIMIT: its order reaches nothing
            refuse_mask("LIMIT, DISTINCT ON, a scalar subquery or ARRAY over *: unordered", unchecked=True)
        keys: list[exp.Expr] = list(order.expressions) if order is not None else []
        if not keys and on is not None:
            # PostgreSQL: ORDER BY must begin with the DISTINCT ON expressions
            on_exprs = on.expressions if isinstance(on, exp.Tuple) else [on]
            keys = [_ordered(e.copy(), dialect) for e in on_exprs]
        if count:
            exact = _exact_outputs(node, dialect) if isinstance(node, exp.Select) else []
            outputs = ordinals(node, count, dialect)
            exact = [e for e in exact if e not in outputs]  # an orderless output's text form is there
            if isinstance(node, exp.Select) and (top or limited or scalar):
                exact += row_order(node, keyed, dialect)  # where the scan stops (rt20mask F1)
            room.add([*(keys if order is None else []), *outputs, *exact], _TIES)
            node.set("order", exp.Order(expressions=[*keys, *outputs, *exact]))
            pinned = True
    return pinned


def _pin_aggregates(tree: exp.Expr, dialect: str, masked_aggs: frozenset[int], room: NodeAllowance) -> bool:
    pinned = False
    for agg in list(tree.find_all(exp.AggFunc, exp.Anonymous)):
        name = str(agg.this).casefold() if isinstance(agg, exp.Anonymous) else ""
        if not isinstance(agg, CONCAT) and name not in CONCAT_NAMES:
            continue
        if isinstance(agg.parent, exp.Window):
            continue  # refused by window_keys
        if id(agg) in masked_aggs:
            continue  # it reads a masked value: its output is masked whatever the order
        refuse_pick(agg)
        args, written = split(agg)
        if not args and written is None:
            continue  # only constants: the answer does not depend on the order
        objects = isinstance(agg, exp.JSONObjectAgg | exp.JSONBObjectAgg) or name in OBJECT_NAMES
        facts = profile_class(dialect)
        if not (facts.ordered_object_aggregates if objects else facts.ordered_aggregates):
            refuse_order(CONCAT_UNORDERED, f"unordered aggregate {type(agg).__name__} {name}")
        # PostgreSQL: with DISTINCT, ORDER BY may only name the arguments themselves.
        positional = positional_args(agg)
        distinct = any(isinstance(a, exp.Distinct) or isinstance(a.this, exp.Distinct) for a in positional)
        ties = [t for a in args for t in _ties(a, dialect, exact=not distinct)]
        room.add(ties, _TIES)
        if written is not None:  # GROUP_CONCAT(x ORDER BY k): ties broken by x
            written.set("expressions", [*written.expressions, *ties])
        elif isinstance(agg, exp.Anonymous | exp.JSONObjectAgg | exp.JSONBObjectAgg):
            fname = name or ("jsonb_object_agg" if isinstance(agg, exp.JSONBObjectAgg) else "json_object_agg")
            if any(isinstance(a, exp.JSONKeyValue) for a in positional):
                refuse_order(CONCAT_UNORDERED, "JSON_OBJECTAGG(k : v) cannot be ordered")
            *head, last = positional
            ordered = exp.Order(this=last.copy(), expressions=ties)
            agg.replace(exp.Anonymous(this=fname, expressions=[*(h.copy() for h in head), ordered]))
        else:
            agg.set("this", exp.Order(this=agg.this.copy(), expressions=ties))
        pinned = True
    return pinned


def pin_order(
    tree: exp.Expr,
    width: int,
    dialect: str,
    windows: dict[int, tuple[str, list[exp.Expr]]],
    masked_aggs: frozenset[int] = frozenset(),
    blocks: Keyed | None = None,
    max_nodes: int | None = None,
) -> bool:
    """Complete every order an answer over a masked read depends on, in place; True if changed.

    - the top level, every block with ORDER BY, LIMIT/OFFSET, DISTINCT ON or under ARRAY(...):
      ORDER BY what the agent wrote, then every output (ordinals); DISTINCT ON without ORDER BY
      first orders by its own expressions (a block with `*` there is refused: width unknown);
    - windows (`window_keys`): their ORDER BY completed with the visible columns they number;
    - concatenating aggregates (string_agg, array_agg, GROUP_CONCAT, json_agg, jsonb_agg,
      json_object_agg, xmlagg, JSON_ARRAYAGG): ordered by their own arguments after any ORDER BY
      written; where the database cannot order one (SQLite; MariaDB's JSON_OBJECTAGG) refused,
      unless it reads a masked value (then its output is masked anyway).

    Every tie-breaker is counted as it is built: refused (`too_complex`) once the tree would pass
    `max_nodes` (`NodeAllowance`; None: unbounded).
    """
    room = NodeAllowance(tree, max_nodes)
    pinned = _pin_blocks(tree, width, dialect, blocks or {}, room)
    for window in list(tree.find_all(exp.Window)):
        marker = window.meta.get(WIN)
        if marker not in windows:
            continue
        need, keys = windows[marker]
        if not keys:
            continue
        order = window.args.get("order")
        written = list(order.expressions) if order is not None else []
        ties: list[exp.Expr] = [*written]
        for key in keys:  # counted as built: 95 columns' exact forms are 1,600 nodes per window
            ties += (more := _ties(key, dialect))
            room.add(more, _TIES)
        window.set("order", exp.Order(expressions=ties))
        if need == "whole":
            bounds = {"start": "UNBOUNDED", "start_side": "PRECEDING", "end": "UNBOUNDED"}
            window.set("spec", exp.WindowSpec(kind="ROWS", end_side="FOLLOWING", **bounds))
        pinned = True
    summed = pin_sums(tree, dialect, masked_aggs, room, _TIES)  # floating, interval, money sums
    return _pin_aggregates(tree, dialect, masked_aggs, room) or summed or pinned
