"""Pin the representative a database keeps of equal values (red teams rt35a F4, F5; rt35b F5).

min/max, percentile_disc, mode, DISTINCT (in a select or an aggregate), GROUP BY and UNION keep
one of the values that compare equal, the first or last the scan meets. The agent can make equal
values print differently from any row (`round(1::numeric, id)`, `CASE id WHEN 2 THEN 'a' ELSE 'A'
END` under a case-insensitive collation), so the printed representative names a row by its place in
a scan that may follow a masked column. Over a masked read, for a value not `alike.alike` and not a
column read straight from a table (whose variants are data, a documented residual):

- GROUP BY: its exact form (`Profile.exact_ties`) is added as a grouping key, so values that print
  differently are different groups (a key read through an alias or a position is resolved first);
- SELECT DISTINCT without grouping or windows: sent as GROUP BY the outputs and their exact forms;
  DISTINCT ON: its ORDER BY (which picks the row kept) completed with the exact forms;
- min/max: ordered by the value and its exact form where the engine takes an ORDER BY in them
  (PostgreSQL: `max(x ORDER BY x, format('%L', x) COLLATE "C")`), refused elsewhere (MariaDB);
- refused: min/max over a window, percentile_disc/percentile_cont/mode/median (their ORDER BY takes
  one key; percentile_cont over `sums.exact` keys is answered: equal ones are one float8), DISTINCT
  aggregates other than count, DISTINCT over grouped or window results, UNION without ALL, INTERSECT
  and EXCEPT (ALL too), GROUP BY ROLLUP/CUBE/GROUPING SETS, PostgreSQL range_agg/range_intersect_agg
  (rt36 F7), SELECT DISTINCT with a star whose columns (read from the qualified twin) or other
  outputs do not print one way (rt36 F4, F11).
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from mcpkit.sql.admission.budget import NodeAllowance
from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.masking.alike import Sources, alike, covered, defining, facts_of, set_branches, stored
from mcpkit.sql.masking.sums import exact
from mcpkit.sql.masking.ties import BLOCK, is_aggregate, refuse_order
from mcpkit.sql.profiles import profile_class

__all__ = ["pin_representatives"]

_TIES: Final = "masking's grouping keys"
_WHY: Final = (
    "among equal values that print differently (1.0 and 1.00, 'a' and 'A') the database keeps the one "
    "it scans first or last, and the scan order can follow a masked column"
)
_WINDOW_PICK: Final = (
    f"Over a table with masked columns, min and max over a window are answered only over a value that "
    f"prints one way (an integer, a date, a text column): {_WHY}; cast a decimal, float or interval "
    "value to a scaled numeric(p, s) or to text first."
)
_PICK: Final = (
    f"Over a table with masked columns, MIN and MAX of a computed text or floating-point value are not "
    f"answered on this database: {_WHY}; apply them to the column itself, to CAST(... AS BINARY) for "
    "text, or to CAST(... AS DECIMAL(30, 10)) for a number."
)
_ORDERED_SET: Final = (
    f"Over a table with masked columns, percentile_disc, percentile_cont, mode and median are answered "
    f"only over a value that prints one way (an integer, a date, a text column): {_WHY}; cast a decimal, "
    "float or interval key to a scaled numeric(p, s) or to text first."
)
_DISTINCT_AGGREGATE: Final = (
    f"Over a table with masked columns, an aggregate of DISTINCT values other than count is answered "
    f"only over a value that prints one way (an integer, a date, a text column): {_WHY}; cast a "
    "decimal, float or interval value to a scaled numeric(p, s) or to text first."
)
_SET_OPERATION: Final = (
    f"Over a table with masked columns, UNION without ALL, INTERSECT and EXCEPT are answered only over "
    f"columns or values that print one way (integers, dates): {_WHY}; use UNION ALL and SELECT "
    "DISTINCT outside."
)
_DISTINCT_GROUPED: Final = (
    f"Over a table with masked columns, SELECT DISTINCT over aggregates or windows is answered only "
    f"for values that print one way (integers, dates): {_WHY}; select DISTINCT in an outer query."
)
_GROUPING_SETS: Final = (
    f"Over a table with masked columns, ROLLUP, CUBE and GROUPING SETS are answered only over columns "
    f"or values that print one way (integers, dates): {_WHY}; group by the columns themselves."
)
_DISTINCT_STAR: Final = (
    f"Over a table with masked columns, SELECT DISTINCT with * is answered only when every column prints "
    f"one way or is read from a table: {_WHY}; name the columns."
)
_RANGE_AGGREGATE: Final = (
    f"Over a table with masked columns, range_agg and range_intersect_agg are answered only over bounds "
    f"that print one way (integers, dates): {_WHY}; aggregate ranges of the columns themselves."
)
_RANGE_AGGREGATES: Final = frozenset({"range_agg", "range_intersect_agg"})
_RANKS: Final = frozenset({"rank", "dense_rank", "percent_rank", "cume_dist"})


def _pinned(node: exp.Expr, dialect: str, types: Sources) -> bool:
    return alike(node, dialect, types) or stored(node, types, dialect)


def _group_key(select: exp.Select, key: exp.Expr, resolved: exp.Expr | None) -> exp.Expr:
    """The expression a GROUP BY key stands for: a position or an output alias is the output's."""
    outputs = select.selects
    if isinstance(key, exp.Literal) and key.is_int and 0 < int(key.this) <= len(outputs):
        return outputs[int(key.this) - 1].unalias()
    if isinstance(key, exp.Column) and not key.table and not isinstance(resolved, exp.Column | None):
        named = [p for p in outputs if isinstance(p, exp.Alias) and p.alias == key.name]
        if len(named) == 1:  # qualify expanded it: the alias, not a source column of that name
            return named[0].unalias()
    return key


_SETS: Final = (exp.Rollup, exp.Cube, exp.GroupingSets)


def _pin_groups(
    select: exp.Select, twin: exp.Select | None, dialect: str, types: Sources, room: NodeAllowance
) -> bool:
    group = select.args.get("group")
    if group is None:
        return False
    # sqlglot keeps `ROLLUP (r)`, `CUBE`, `GROUPING SETS` among the keys, `WITH ROLLUP` beside them
    keys = [k for k in group.expressions if not isinstance(k, _SETS)]
    sets = [k for k in group.expressions if isinstance(k, _SETS)]
    sets += [g for k in ("rollup", "cube", "grouping_sets") for g in group.args.get(k) or []]
    if sets:  # an added key would add subtotal levels: only checked
        inner = [_group_key(select, c, None) for g in sets for c in g.find_all(exp.Column)]
        if any(not _pinned(_group_key(select, k, None), dialect, types) for k in keys) or any(
            not _pinned(c, dialect, types) for c in inner
        ):
            refuse_order(_GROUPING_SETS, "grouping sets over values that print differently")
        return False
    twins = list(twin.args["group"].expressions) if twin is not None and twin.args.get("group") else []
    added: list[exp.Expr] = []
    for i, key in enumerate(keys):
        value = _group_key(select, key, twins[i] if len(twins) == len(keys) else None)
        if not _pinned(value, dialect, types):
            added += profile_class(dialect).exact_ties(value)
    if added:
        room.add(added, _TIES)
        group.set("expressions", [*keys, *added])
    return bool(added)


def _star_pinned(outputs: list[exp.Expr], twin: exp.Select | None, dialect: str, types: Sources) -> bool:
    """Every output of a DISTINCT with a star prints one way, the star's columns read from the
    qualified twin (rt36 F4, F11): a table's column is its data; a derived one, its definition's."""
    if twin is None or any(
        isinstance(o, exp.Star) or (isinstance(o, exp.Column) and o.is_star)
        for o in [p.unalias() for p in twin.selects]
    ):
        return False
    for output in [p.unalias() for p in twin.selects]:
        if _pinned(output, dialect, types):
            continue
        if not isinstance(output, exp.Column):
            return False
        found = defining(output)
        if not found and not _table_column(twin, output):
            return False  # a derived column not traced: not known to print one way
        if any(not _pinned(d, dialect, types) for d in found):
            return False
    return all(_pinned(o, dialect, types) for o in outputs if not isinstance(o, exp.Star | exp.Column))


def _table_column(select: exp.Select, col: exp.Column) -> bool:
    """`col` is read from a table named in `select`'s FROM (no CTE, no derived table)."""
    ctes = {c.alias_or_name for w in select.find_all(exp.With) for c in w.expressions}
    node: exp.Expr | None = select
    while node is not None:
        with_ = node.args.get("with_")
        ctes |= {c.alias_or_name for c in with_.expressions} if isinstance(with_, exp.With) else set()
        node = node.parent
    for source in [select.args.get("from_"), *(select.args.get("joins") or [])]:
        this = source.this if source is not None else None
        if this is not None and this.alias_or_name == col.table:
            return isinstance(this, exp.Table) and (bool(this.db) or this.name not in ctes)
    return False


def _pin_distinct(
    select: exp.Select, twin: exp.Select | None, dialect: str, types: Sources, room: NodeAllowance
) -> bool:
    distinct = select.args.get("distinct")
    if not isinstance(distinct, exp.Distinct):
        return False
    outputs = [p.unalias() for p in select.selects]
    if distinct.args.get("on") is not None:
        return _pin_distinct_on(select, distinct, outputs, dialect, types, room)
    if any(isinstance(o, exp.Star) or (isinstance(o, exp.Column) and o.is_star) for o in outputs):
        if not _star_pinned(outputs, twin, dialect, types):
            refuse_order(_DISTINCT_STAR, "DISTINCT with a star over values that print differently")
        return False
    if all(_pinned(o, dialect, types) for o in outputs):
        return False
    grouped = select.args.get("group") is not None or any(
        isinstance(n, exp.AggFunc | exp.Window) or (isinstance(n, exp.Anonymous) and is_aggregate(n))
        for o in outputs
        for n in o.walk()
    )
    if grouped:
        refuse_order(_DISTINCT_GROUPED, "DISTINCT over grouped values that print differently")
    keys: list[exp.Expr] = []
    ties: list[exp.Expr] = []
    for output in outputs:
        if isinstance(output, exp.Literal | exp.Null) or (
            isinstance(output, exp.Cast) and isinstance(output.this, exp.Null)
        ):
            continue  # a constant (or a masked output's typed NULL) is one group already
        keys.append(output.copy())
        if not _pinned(output, dialect, types):
            ties += profile_class(dialect).exact_ties(output)
    order = select.args.get("order")
    # 'a' and 'A' are now two rows, equal for the ORDER BY pin_order completed: ordered by their forms
    small = Dialect.get_or_raise(sent_dialect(dialect)).NULL_ORDERING == "nulls_are_small"
    extra = [exp.Ordered(this=t.copy(), nulls_first=small) for t in ties] if order is not None else []
    room.add([*keys, *ties, *extra], _TIES)
    select.set("distinct", None)
    select.set("group", exp.Group(expressions=[*keys, *ties]))
    if isinstance(order, exp.Order):
        order.set("expressions", [*order.expressions, *extra])
    return True


def _folded(name: exp.Expr) -> str:
    return name.name if isinstance(name, exp.Identifier) and name.quoted else name.name.casefold()


def _pin_distinct_on(
    select: exp.Select,
    distinct: exp.Distinct,
    outputs: list[exp.Expr],
    dialect: str,
    types: Sources,
    room: NodeAllowance,
) -> bool:
    """DISTINCT ON keeps the first row of its ORDER BY (pin_order wrote one): among keys equal
    there, the exact forms of the keys and outputs decide."""
    on = distinct.args["on"]
    named = {_folded(p.args["alias"]) for p in select.selects if isinstance(p, exp.Alias)}
    # a key naming an output alias is that output (among `outputs`): PostgreSQL reads no alias
    # inside an ORDER BY expression (red team v4 L1: `format('%L', x)` failed)
    keys = [
        k
        for k in (on.expressions if isinstance(on, exp.Tuple) else [on])
        if not (isinstance(k, exp.Column) and not k.table and _folded(k.this) in named)
    ]
    order = select.args.get("order")
    if order is None:
        return False
    values = [v for v in [*keys, *outputs] if not isinstance(v, exp.Star) and not _pinned(v, dialect, types)]
    ties = [exp.Ordered(this=t) for v in values for t in profile_class(dialect).exact_ties(v)]
    if not ties:
        return False
    room.add(ties, _TIES)
    order.set("expressions", [*order.expressions, *ties])
    return True


def _check_set_operation(node: exp.SetOperation, dialect: str, types: Sources) -> None:
    if not node.args.get("distinct") and isinstance(node, exp.Union):
        return  # UNION ALL keeps every row; INTERSECT ALL and EXCEPT ALL keep one of equal rows
    for branch in set_branches(node):
        outputs = [p.unalias() for p in branch.selects] if isinstance(branch, exp.Select) else [branch]
        if any(not _pinned(o, dialect, types) for o in outputs):
            refuse_order(_SET_OPERATION, "UNION/INTERSECT/EXCEPT dedup over values that print differently")


def _in_window(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Filter | exp.WithinGroup | exp.IgnoreNulls | exp.RespectNulls):
        parent = parent.parent
    return isinstance(parent, exp.Window)


def _pin_pick(agg: exp.Expr, dialect: str, types: Sources, room: NodeAllowance) -> bool:
    if agg.expressions or not isinstance(agg.this, exp.Expr):
        return False  # SQLite's scalar max(a, b)
    value = agg.this.this if isinstance(agg.this, exp.Order) else agg.this
    value = value.expressions[0] if isinstance(value, exp.Distinct) and value.expressions else value
    if _pinned(value, dialect, types):
        return False
    if _in_window(agg):
        refuse_order(_WINDOW_PICK, "min/max over a window of values that print differently")
    if not facts_of(dialect).ordered_picks:
        refuse_order(_PICK, "MIN/MAX over computed values that print differently")
    ties = [exp.Ordered(this=value.copy())]
    ties += [exp.Ordered(this=e) for e in profile_class(dialect).exact_ties(value)]
    room.add(ties, _TIES)
    # min(DISTINCT x) is min(x): DISTINCT would restrict the ORDER BY to the arguments
    agg.set("this", exp.Order(this=value.copy(), expressions=ties))
    return True


def _check_ordered_set(node: exp.WithinGroup, dialect: str, types: Sources) -> None:
    call = node.this
    name = call.name if isinstance(call, exp.Anonymous) else type(call).__name__
    if name.casefold().replace("_", "") in {r.replace("_", "") for r in _RANKS}:
        return  # hypothetical-set aggregates answer a number
    order = node.expression
    keys = [o.this for o in order.expressions] if isinstance(order, exp.Order) else []
    literals = not facts_of(dialect).signed_zeros  # MariaDB: `1e0` is a double, and may be -0 (rtB F4)
    if keys and isinstance(call, exp.PercentileCont) and all(exact(k, literals) for k in keys):
        return  # interpolated in float8: equal integers and numerics convert to one value (never -0)
    if not keys or any(not _pinned(k, dialect, types) for k in keys):
        refuse_order(_ORDERED_SET, "ordered-set aggregate over values that print differently")


def _check_distinct_aggregate(node: exp.Distinct, dialect: str, types: Sources) -> None:
    agg = node.parent.parent if isinstance(node.parent, exp.Order) else node.parent
    if agg is None or isinstance(agg, exp.Select | exp.Count | exp.Min | exp.Max):
        return
    if isinstance(agg, exp.Anonymous) and agg.name.casefold() in {"count", "min", "max"}:
        return
    if any(not _pinned(e, dialect, types) for e in node.expressions):
        refuse_order(_DISTINCT_AGGREGATE, f"DISTINCT {type(agg).__name__} over values that print differently")


def _check_range_aggregate(call: exp.Anonymous, dialect: str, types: Sources) -> None:
    """range_agg keeps one of equal bounds ([1.0,5) and [1.00,5)), as max does (rt36 F7)."""
    for arg in call.expressions:
        bounds = arg.expressions if isinstance(arg, exp.Anonymous) else [arg]
        if any(not _pinned(b, dialect, types) for b in bounds if not isinstance(b, exp.Literal)):
            refuse_order(_RANGE_AGGREGATE, "range_agg over bounds that print differently")


def pin_representatives(
    tree: exp.Expr,
    qualified: exp.Expr,
    dialect: str,
    types: Sources,
    max_nodes: int | None,
) -> bool:
    """Pin, in place, every representative `tree` keeps of equal values (above); True if changed.

    Args:
        tree: The work tree of a query over a masked read (masked values already typed NULLs).
        qualified: Its qualified twin (blocks share `ties.BLOCK` markers): where GROUP BY names resolve.
        dialect: The engine's dialect.
        types: The query's columns (`alike.sources`).
        max_nodes: The sent-tree bound the added keys are counted against (None: unbounded).

    Raises:
        MaskRefused: a representative that cannot be pinned on this engine.
    """
    if not covered(dialect):
        return False
    room = NodeAllowance(tree, max_nodes)
    changed = False
    for node in list(tree.find_all(exp.WithinGroup, exp.Median)):
        if isinstance(node, exp.Median):
            if not _pinned(node.this, dialect, types):
                refuse_order(_ORDERED_SET, "median over values that print differently")
        elif isinstance(node, exp.WithinGroup):
            _check_ordered_set(node, dialect, types)
    for call in [a for a in tree.find_all(exp.Anonymous) if a.name.casefold() in _RANGE_AGGREGATES]:
        _check_range_aggregate(call, dialect, types)
    for distinct in list(tree.find_all(exp.Distinct)):
        _check_distinct_aggregate(distinct, dialect, types)
    for set_operation in list(tree.find_all(exp.SetOperation)):
        _check_set_operation(set_operation, dialect, types)
    for agg in [a for a in tree.find_all(exp.Min, exp.Max) if isinstance(a, exp.Min | exp.Max)]:
        changed = _pin_pick(agg, dialect, types, room) or changed
    twins = {s.meta[BLOCK]: s for s in qualified.find_all(exp.Select) if BLOCK in s.meta}
    for select in list(tree.find_all(exp.Select)):
        changed = _pin_groups(select, twins.get(select.meta.get(BLOCK)), dialect, types, room) or changed
        changed = _pin_distinct(select, twins.get(select.meta.get(BLOCK)), dialect, types, room) or changed
    return changed
