"""Which orders over a masked read are completed, and with what: the analysis on the qualified tree.

`window_keys` finds, for each window whose value depends on the order within ties, the visible
columns that complete its order (or refuses it); `refuse_bare_columns` refuses a bare column
beside GROUP BY (SQLite, MariaDB). `order.pin_order` then rewrites the work tree with them.
"""

from __future__ import annotations

import re
from typing import Final, NoReturn

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from mcpkit.sql.masking.shapes import USER_AGGREGATE
from mcpkit.sql.masking.taint import Taint, refuse_mask
from mcpkit.sql.profiles import profile_class

__all__ = ["BLOCK", "CONCAT", "CONCAT_NAMES", "CONCAT_UNORDERED", "EXACT", "OBJECT_NAMES", "TYPE"]
__all__ += [
    "WIN",
    "is_aggregate",
    "output_keys",
    "plain_type",
    "refuse_bare_columns",
    "refuse_order",
    "refuse_pick",
    "window_keys",
]

WIN: Final = "mcpkit_win"  # meta key: index of a window node, the same in the work and qualified trees
BLOCK: Final = "mcpkit_block"  # meta key: index of a SELECT, the same in the work and qualified trees

# Numbering and offsets: the value depends on the order within ties; a refinement keeps the meaning.
_ROW_ORDER: Final = (exp.RowNumber, exp.Ntile, exp.Lag, exp.Lead)
# Peer-based: tie-invariant, left as written.
_PEERS: Final = (exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist)
_VALUE: Final = (exp.FirstValue, exp.LastValue, exp.NthValue)
# Aggregates whose result follows the order their rows arrive in; any_value (PostgreSQL 16, MySQL
# 8) keeps the value of the first row the scan meets.
CONCAT: Final = (
    exp.GroupConcat, exp.ArrayAgg, exp.JSONArrayAgg, exp.JSONObjectAgg, exp.JSONBObjectAgg, exp.AnyValue
)  # fmt: skip
CONCAT_NAMES: Final = frozenset(
    {
        "any_value",
        *("jsonb_agg", "json_agg", "jsonb_agg_strict", "json_agg_strict"),
        "xmlagg",
        "json_arrayagg",
        "json_objectagg",
        "json_object_agg",
        "jsonb_object_agg",
    }
    | {f"{k}_object_agg_{s}" for k in ("json", "jsonb") for s in ("unique", "strict", "unique_strict")}
)
# Aggregates sqlglot leaves as anonymous functions in some dialects.
_ANON_AGGREGATES: Final = CONCAT_NAMES | frozenset(
    {"std", "stddev", "variance", "bit_and", "bit_or", "bit_xor", "bool_and", "bool_or", "every", "total"}
    | {"xmlagg", "range_agg", "range_intersect_agg", "json_agg", "jsonb_agg", "json_arrayagg"}
)
OBJECT_NAMES: Final = frozenset({"json_objectagg", "json_group_object"})

_WINDOW_INLINE: Final = (
    "Over a table with masked columns, a numbering, offset or value window must be written inline "
    "(OVER (PARTITION BY ... ORDER BY ...)), not as a named WINDOW."
)
_WINDOW_FRAME: Final = (
    "Over a table with masked columns, last_value and nth_value over a window with ORDER BY need "
    "a ROWS frame (for example ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING); order "
    "the window by a unique visible key such as the primary key."
)
_WINDOW_SOURCES: Final = (
    "Over a table with masked columns, this window's order cannot be completed with visible "
    "columns; order it by a unique visible key such as the primary key, over plain tables."
)
_CONCAT_WINDOW: Final = (
    "Over a table with masked columns, concatenating aggregates (string_agg, array_agg, "
    "GROUP_CONCAT, json aggregates) cannot be used as window functions: aggregate with GROUP BY."
)
CONCAT_UNORDERED: Final = (
    "Over a table with masked columns, this database cannot order a concatenating aggregate "
    "(group_concat, json_group_array, json_group_object, JSON_OBJECTAGG): its order would follow "
    "the storage order; aggregate the values another way (count, min, max) or select the rows."
)
_PICK: Final = (
    "Over a table with masked columns, any_value keeps the value of the row the storage order meets "
    "first: use min or max."
)
_BARE: Final = (
    "Over a table with masked columns, every selected column of a grouped query must be grouped "
    "or aggregated: a bare column takes its value from a row the storage order picks."
)


def refuse_order(message: str, detail: str) -> NoReturn:
    """Refuse an order over a masked read: `message` for the agent, `detail` for the log."""
    refuse_mask(detail, message=message)


def refuse_pick(agg: exp.Expr) -> None:
    """Refuse `any_value`, which no ORDER BY of ours can pin on every engine (MySQL has none inside it)."""
    if isinstance(agg, exp.AnyValue) or (
        isinstance(agg, exp.Anonymous) and agg.name.casefold() == "any_value"
    ):
        refuse_order(_PICK, "any_value over a masked read")


def _enclosing_select(node: exp.Expr) -> exp.Select | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call, also one sqlglot leaves anonymous (`jsonb_agg`, `bool_and`, a user's: `shapes`)."""
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Anonymous)
        and (str(node.this).casefold() in _ANON_AGGREGATES or bool(node.meta.get(USER_AGGREGATE)))
    )


# Wrappers of an aggregate call whose operands are the aggregate's own (FILTER, WITHIN GROUP).
_CALL_WRAPPERS: Final = (exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)


def _call(agg: exp.Expr) -> exp.Expr:
    """The whole call of an aggregate: with its FILTER (WHERE ...) or WITHIN GROUP (ORDER BY ...)."""
    while isinstance(agg.parent, _CALL_WRAPPERS) and agg.arg_key == "this":
        agg = agg.parent
    return agg


def _defining_select(col: exp.Column) -> exp.Select | None:
    """The block whose FROM defines `col`'s table (the innermost one naming it)."""
    select = col.find_ancestor(exp.Select)
    while select is not None:
        if col.table in _source_names(select):
            return select
        select = select.find_ancestor(exp.Select)
    return None


def aggregate_block(agg: exp.Expr) -> exp.Select | None:
    """The block an aggregate aggregates (None: a window function, `count(*) OVER (...)`).

    SQL (PostgreSQL, SQLite, MariaDB): an aggregate whose operands name only outer blocks'
    columns belongs to the innermost of those blocks, not to the subquery it is written in:
    `SELECT c.id, (SELECT count(c.id)) FROM customers c` is an aggregate query over customers
    (red team rt19lite F7). Operands include the FILTER and WITHIN GROUP clauses and subqueries.
    """
    call = _call(agg)
    if isinstance(call.parent, exp.Window) and call.arg_key == "this":
        return None
    home = call.find_ancestor(exp.Select)
    levels: list[exp.Select] = []
    level = home
    while level is not None:
        levels.append(level)
        level = level.find_ancestor(exp.Select)
    depth = {id(level): i for i, level in enumerate(levels)}
    found = [
        depth[id(owner)]
        for col in call.find_all(exp.Column)
        if col.table and (owner := _defining_select(col)) is not None and id(owner) in depth
    ]
    return levels[min(found)] if found else home


def _aggregated(select: exp.Select) -> bool:
    """A block that aggregates without GROUP BY: it answers one row. HAVING alone makes one
    (SQLite 3.39+: `SELECT id FROM t HAVING 1` answers the row the scan picks; red team my18 F7),
    so does an aggregate of it written inside a window (`sum(count(*)) OVER ()`) or a subquery
    (`aggregate_block`)."""
    if select.args.get("having") is not None:
        return True
    return any(
        is_aggregate(agg) and aggregate_block(agg) is select
        for agg in select.find_all(exp.AggFunc, exp.Anonymous)
    )


def _window_need(window: exp.Window) -> str | None:
    """'keys' (complete the order), 'whole' (order and keep the whole partition) or None."""
    func = window.this.this if isinstance(window.this, exp.Filter) else window.this  # `count(*) FILTER
    # (WHERE ...) OVER ()` is an aggregate over its partition: a completed ORDER BY made it a running count
    spec = window.args.get("spec")
    kind = str(spec.args.get("kind") or "").upper() if isinstance(spec, exp.WindowSpec) else ""
    ordered = window.args.get("order") is not None
    if isinstance(func, CONCAT) or (
        isinstance(func, exp.Anonymous) and str(func.this).casefold() in CONCAT_NAMES
    ):
        refuse_order(_CONCAT_WINDOW, "concatenating aggregate as a window function")
    if isinstance(func, _PEERS):
        return None
    if isinstance(func, exp.WithinGroup) and isinstance(func.this, exp.PercentileCont | exp.PercentileDisc):
        return None  # one of its partition's sorted values; MariaDB takes no ORDER BY here (rtB L1)
    need: str | None
    if isinstance(func, _ROW_ORDER):
        need = "keys"
    elif isinstance(func, _VALUE):
        if kind == "ROWS":
            need = "keys"
        elif not ordered and spec is None:
            need = "whole"
        elif isinstance(func, exp.FirstValue) and (
            spec is None or str(spec.args.get("start") or "").upper() == "UNBOUNDED"
        ):
            need = "keys"  # the frame starts at the partition's first row whatever the ties
        else:
            refuse_order(_WINDOW_FRAME, "value window over a RANGE/GROUPS frame")
    elif isinstance(func, exp.AggFunc):
        need = "keys" if kind == "ROWS" else None  # RANGE, GROUPS, no frame: peers, tie-invariant
    else:  # a function this analysis does not know: ordered to be safe; an aggregate over its whole partition
        need = "whole" if is_aggregate(func) and not (ordered or spec) else "keys"  # (SQLite total(): rte)
    if need is not None and window.args.get("alias") is not None:
        refuse_order(_WINDOW_INLINE, "order-dependent function over a named window")
    return need


# Declared types whose equal values always print alike: no exact tie-breaker needed. The whole
# word only: a domain `yearly_amount` over numeric or `boolish_score` is no year or bool (rtA F4).
_PLAIN_TYPE: Final = re.compile(
    r"((tiny|small|medium|big)?int(eger|[248])?|(big|small)?serial[248]?|bool(ean)?|date|datetime|timestamp(tz)?"
    r"|year)\b(?![-$])",
    re.IGNORECASE,
)
EXACT: Final = "mcpkit_exact"  # meta key: False on a column whose equal values print alike
TYPE: Final = "mcpkit_type"  # meta key: a column's declared type, when read straight from a table


def plain_type(type_text: str | None) -> bool:
    """A declared type whose equal values always print alike (integers, booleans, dates)."""
    return bool(_PLAIN_TYPE.match(type_text or ""))


def _column(name: str, table: str, *, exact: bool = True, declared: str | None = None) -> exp.Column:
    col = exp.Column(this=exp.to_identifier(name, quoted=True), table=exp.to_identifier(table, quoted=True))
    col.meta[EXACT], col.meta[TYPE] = exact, declared  # declared: its ties need no sign of zero (rtB F4)
    return col


def _constant(source: Scope, index: int) -> bool:
    """Output `index` of a derived table is a constant (no column): it identifies no row."""
    select = source.expression
    return isinstance(select, exp.Select) and not any(select.selects[index].find_all(exp.Column))


def _scope_keys(taint: Taint, scope: Scope, *, partial: bool = False) -> list[exp.Expr] | None:
    """Expressions that tell apart every two rows of `scope` differing in a visible value.
    `partial`: skip a source of unknown columns and a derived table's constant outputs."""
    select = scope.expression
    if not isinstance(select, exp.Select):
        return None
    group = select.args.get("group")
    if group is not None:
        sets = [e for e in group.expressions if isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets)]
        if sets or any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")):
            return None  # PostgreSQL's ROLLUP (a) is among the keys (red team v1 L1), WITH ROLLUP beside
        return [e.copy() for e in group.expressions]
    if _aggregated(select):
        return []
    keys: list[exp.Expr] = []
    for name, (node, source) in scope.selected_sources.items():
        if isinstance(source, Scope):
            outs = taint._outputs(source)
            renamed = node.alias_column_names if isinstance(node, exp.Expr) else []
            names = list(renamed) if renamed else [o.name for o in outs]
            if len(names) != len(outs) or not all(names) or len(set(names)) != len(names):
                if partial:
                    continue
                return None
            keys += [
                _column(n, name)
                for i, (n, o) in enumerate(zip(names, outs, strict=True))
                if not o.tainted and not (partial and _constant(source, i))
            ]
        elif isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            schema = taint.schema.schema_of(source)
            keys += [
                _column(visible, name, exact=not plain_type(type_text), declared=type_text)
                for visible, (real, type_text) in taint._visible_columns(source).items()
                if not taint.policy.masks(schema, source.name, real)
            ]
        elif not partial:
            return None  # a table function, VALUES, UNNEST: no known columns to order by
    return keys


def window_keys(taint: Taint, qualified: exp.Expr) -> dict[int, tuple[str, list[exp.Expr]]]:
    """For each window whose value depends on the order within ties: what to add (refuses the
    windows that cannot be completed). Keyed by the window's `WIN` marker."""
    found: dict[int, tuple[str, list[exp.Expr]]] = {}
    for window in qualified.find_all(exp.Window):
        marker = window.meta.get(WIN)
        if marker is None or isinstance(window.this, exp.Identifier):
            continue  # a WINDOW w AS (...) definition: checked where it is used
        need = _window_need(window)
        if need is None:
            continue
        select = _enclosing_select(window)
        scope = taint.by_expr.get(id(select)) if select is not None else None
        keys = _scope_keys(taint, scope) if scope is not None else None
        if keys is None:
            refuse_order(_WINDOW_SOURCES, "window over sources without known visible columns")
        found[marker] = (need, keys)
    return found


def _source_names(select: exp.Select) -> set[str]:
    from_ = select.args.get("from_")
    sources = [from_.this] if isinstance(from_, exp.From) else []
    sources += [j.this for j in select.args.get("joins") or []]
    sources += list(select.args.get("laterals") or [])
    return {s.alias_or_name for s in sources}


def _outer_reference(col: exp.Column, select: exp.Select) -> bool:
    """Whether `col` reads a row of `select`'s sources (directly, or correlated from a subquery)."""
    inner = col.find_ancestor(exp.Select)
    while inner is not None and inner is not select:
        if col.table in _source_names(inner):
            return False  # the subquery's own source
        inner = inner.find_ancestor(exp.Select)
    return inner is select


def refuse_bare_columns(qualified: exp.Expr) -> None:
    """SQLite, MariaDB: refuse a grouped block that selects, orders or filters on a bare column.

    SQLite takes a bare column from an arbitrary row of the group (the row of the min or max
    when there is one, and an arbitrary one among its ties), MariaDB from the first row it scans
    (its ONLY_FULL_GROUP_BY does not look at ORDER BY or a window's ORDER BY): the scan order
    picks it. A correlated subquery's reference to the grouped block's row counts as bare
    (`SELECT (SELECT c.id), count(*) FROM customers c`).
    """
    for select in qualified.find_all(exp.Select):
        group = select.args.get("group")
        if group is None and not _aggregated(select):
            continue
        keys = {g.sql() for g in group.expressions} if group is not None else set()
        places = [*select.selects, select.args.get("having"), select.args.get("order")]
        for place in places:
            if place is None:
                continue
            for col in place.find_all(exp.Column):
                if not col.table or isinstance(col.this, exp.Star):
                    continue  # an output alias (ORDER BY n) or a star
                if not _outer_reference(col, select):
                    continue  # a subquery's own column
                node: exp.Expr | None = col
                covered = False
                while node is not None and node is not select:
                    agg = node
                    while isinstance(agg, _CALL_WRAPPERS):
                        agg = agg.this
                    if node.sql() in keys or (is_aggregate(agg) and aggregate_block(agg) is select):
                        covered = True
                        break
                    node = node.parent
                if not covered:
                    refuse_order(_BARE, f"bare column {col.sql()} in a grouped query")


_ORDERLESS: Final = (
    "An output of this query has a type the database cannot order (json, xml, a geometric type), and "
    "an answer over masked data is put in a total order of its outputs; cast it to text (or jsonb)."
)


def _branches(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Subquery):
        node = node.this
    if isinstance(node, exp.SetOperation):
        return [*_branches(node.this), *_branches(node.expression)]
    return [node]


def output_keys(node: exp.Expr, count: int, dialect: str) -> list[exp.Expr]:
    """The outputs of block `node` as tie-breakers: ordinals, but the text form of an output the
    database cannot order (`Profile.orderless`: PostgreSQL's json, xml, geometric types; a column's
    declared type is its `TYPE`). A set operation or parenthesised query is ordered by its outputs
    only (refused then); DISTINCT over such a type fails by itself."""
    profile = profile_class(dialect)
    keys: list[exp.Expr] = []
    for i in range(count):
        outputs = [b.selects[i] for b in _branches(node) if isinstance(b, exp.Select) and i < len(b.selects)]
        if not any(profile.orderless(o, o.unalias().meta.get(TYPE)) for o in outputs):
            keys.append(exp.Literal.number(i + 1))
        elif isinstance(node, exp.Select) and node.args.get("distinct") is None:
            keys += profile.exact_ties(outputs[0].unalias())[:1]
        elif isinstance(node, exp.Select):
            keys.append(exp.Literal.number(i + 1))
        else:
            refuse_mask(
                "an output without ordering in a set operation or parenthesised query", message=_ORDERLESS
            )
    return keys
