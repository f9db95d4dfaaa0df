"""Stored views and SQL functions whose answer follows a masked scan order (red team rt19mask F8).

A call that names only a view, or calls an allowed SQL-language function, runs the stored body as written:
the analysis of the call (`masking.order`) pins the call's own orders but never sees `SELECT id FROM
customers LIMIT 3`, `row_number() OVER ()` or an unordered `string_agg` inside the view, whose answer
follows the order the scan picks, which an index on a masked column (or CLUSTER, or the written order) can
set. Nor does it see `ORDER BY email` there, which hands the masked ranking on to a LIMIT or a numbering. At
start-up each such object over a masked table (`profiles.stored`) is analysed here:

- TABLESAMPLE counts whatever its method or REPEATABLE seed: the pages or rows it keeps follow
  the physical order (red team rt21);
- a system column that tells a row's physical position or write order (`StoredQuery.positions`:
  PostgreSQL's `ctid`, `xmin`, ...) counts wherever it is read: after CLUSTER on a masked column's
  index `ORDER BY pos` over a view's `ctid` answered the masked ranking (red team rt23 F6);
- every construct that follows the scan order (LIMIT/OFFSET/FETCH, DISTINCT ON, a numbering,
  offset or value window, a concatenating, `any_value` or user-defined aggregate, an
  `ARRAY(subquery)`) must be ordered totally: by every column of the primary key of the one
  table its block reads (a non-SETOF function's last query counts as `LIMIT 1`: it keeps the
  first row, red team rt24 F5, `masking.first_row`); anything else (no ORDER BY, a key with
  ties, a join, a derived table, a CTE or a name a WITH around it defines: red team rt25 F2,
  `first_row.cte_for`) counts as following the scan;
- an ORDER BY (of a block, a window or an aggregate; by name, alias or position), a PARTITION BY
  or a DISTINCT ON over a column a rule masks (by name) counts too: it hands the masked ranking on.
  Filters and joins on a masked column are left to the database (an invoker's view or function
  is refused the column when it runs) and to the owner-rights checks (`Profile.use_masks`).

What counts refuses start-up (`Finding`, opt-in `view-order:S.N` / `function-order:S.N`) and
`grant --mask` grants nothing on the view.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from mcpkit.sql.dialects import read_dialect
from mcpkit.sql.masking.first_row import (
    Fold,
    KeyLookup,
    block_of,
    first_row,
    name_fold,
    one_table,
    primary_keys,
)
from mcpkit.sql.masking.first_scanned import first_scanned, fix_hint
from mcpkit.sql.masking.named_windows import inline_windows
from mcpkit.sql.masking.policy import MaskPolicy
from mcpkit.sql.masking.schema import KnownSchema
from mcpkit.sql.masking.set_rows import mark_opaque, multiplies, numbering
from mcpkit.sql.masking.shapes import row_order_call, written_call
from mcpkit.sql.masking.taint import MaskRefused
from mcpkit.sql.masking.ties import CONCAT, CONCAT_NAMES, _window_need
from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.stored import StoredQuery

__all__ = ["KeyLookup", "order_findings", "order_reason", "order_reasons", "primary_keys"]

_CONCAT_AGGS: Final = (*CONCAT, exp.Anonymous)


def _columns(
    nodes: Iterable[exp.Expr], select: exp.Select, own: exp.Table, block: bool, fold: Fold
) -> set[str]:
    """Plain column names of the block's own table among order keys, as the engine folds them
    (`name_fold`: PostgreSQL's `"ID"` is not `id`, red team rt27 F3). `block`: a block's ORDER BY,
    where an ordinal or a bare output alias names that output; in a window's or an aggregate's
    order a name is an input column, so a name some output aliases to another value counts for
    neither reading. A column qualified by another name (an outer row's) counts for nothing."""
    out: set[str] = set()
    outputs = select.expressions
    aliases = {fold(e.alias): e.unalias() for e in outputs if isinstance(e, exp.Alias)}
    for node in nodes:
        key = node.this if isinstance(node, exp.Ordered) else node
        if block and isinstance(key, exp.Literal) and key.is_int and 0 < int(key.name) <= len(outputs):
            key = outputs[int(key.name) - 1].unalias()
        elif isinstance(key, exp.Column) and not key.table and fold(key.name) in aliases:
            named = aliases[fold(key.name)]
            same = isinstance(named, exp.Column) and fold(named.name) == fold(key.name)
            key = named if block or same else None
        if not isinstance(key, exp.Column) or fold(key.table) not in ("", fold(own.alias_or_name)):
            continue
        if not key.db or (fold(own.db) == fold(key.db) and own.alias_or_name == own.name):
            out.add(fold(key.name))  # MariaDB's stored text: `db`.`customers`.`id`
    return out


def _total(
    select: exp.Expr | None, keys: Iterable[exp.Expr], known: KnownSchema, unique: KeyLookup, block: bool
) -> bool:
    """Whether `keys` order the rows of `select` totally: they hold a whole primary key of its one
    catalog table (rows that tie then are the same row; a CTE or derived table has no known key),
    and no set-returning call in its select list multiplies them (red team rt27 F8)."""
    table = one_table(select)
    if table is None or not isinstance(select, exp.Select) or multiplies(select):
        return False
    fold = name_fold(known)
    names = _columns(keys, select, table, block, fold)
    return any(key and {fold(k) for k in key} <= names for key in unique(known.schema_of(table), table.name))


def _concat(agg: exp.Expr, aggregates: frozenset[str]) -> bool:
    if isinstance(agg, exp.Anonymous):
        name = str(agg.this).casefold()
        return name in CONCAT_NAMES or name in aggregates
    return isinstance(agg, CONCAT)


def _written_order(agg: exp.Expr) -> list[exp.Expr] | None:
    """The ORDER BY written inside an aggregate call (`string_agg(x, ',' ORDER BY k)`), or None."""
    for arg in [agg.this, *agg.expressions]:
        if isinstance(arg, exp.Order):
            return list(arg.expressions)
    return None


def _named(call: exp.Expr) -> str:
    if isinstance(call, exp.Anonymous):
        return call.name.casefold()
    return call.sql_name().casefold() if isinstance(call, exp.Func) else call.key


def _scan_order(
    query: exp.Expr, known: KnownSchema, unique: KeyLookup, aggregates: frozenset[str] = frozenset()
) -> str | None:
    """The first construct of `query` whose answer follows the scan order, described; None.
    `aggregates`: the user-defined aggregates (case-folded names), which may concatenate."""
    if query.find(exp.TableSample) is not None:  # the pages or rows it keeps follow the physical order
        return "TABLESAMPLE, whose sample follows the table's physical order"
    for node in query.find_all(exp.Select, exp.SetOperation, exp.Subquery):
        order = node.args.get("order")
        written = list(order.expressions) if isinstance(order, exp.Order) else []
        distinct = node.args.get("distinct")
        on = distinct.args.get("on") if isinstance(distinct, exp.Distinct) else None
        limited = node.args.get("limit") is not None or node.args.get("offset") is not None
        if limited and not _total(node, written, known, unique, True):
            return "LIMIT, OFFSET or FETCH without an ORDER BY on a whole primary key"
        if on is not None and not _total(node, written, known, unique, True):
            return "DISTINCT ON without an ORDER BY on a whole primary key"
    for window in query.find_all(exp.Window):
        if isinstance(window.this, exp.Identifier):
            continue  # a WINDOW w AS (...) definition: checked where it is used
        try:
            need = _window_need(window)
        except MaskRefused:
            return f"window {window.this.sql()[:40]} over a named window or as a concatenating aggregate"
        if need is None:
            continue  # peers (rank) or an aggregate over a RANGE frame: ties do not change it
        order = window.args.get("order")
        keys = [*(window.args.get("partition_by") or []), *(order.expressions if order else [])]
        if not _total(block_of(window), keys, known, unique, False):
            name = _named(window.this)
            return f"window {name} without an order on a whole primary key"
    for agg in query.find_all(*_CONCAT_AGGS):
        if not _concat(agg, aggregates) or isinstance(agg.parent, exp.Window):
            continue
        if not any(True for _ in agg.find_all(exp.Column)):
            continue  # only constants: the same whatever the order
        if not _total(block_of(agg), _written_order(agg) or [], known, unique, False):
            name = _named(agg)
            return f"aggregate {name} without an ORDER BY on a whole primary key"
    for array in query.find_all(exp.Array):  # ARRAY(SELECT ...) lists the rows as the scan meets them
        for sub in array.expressions:
            if not isinstance(sub, exp.Query) or not any(True for _ in sub.find_all(exp.Column)):
                continue  # ARRAY[a, b] (one row's values), or only constants
            order = sub.args.get("order")
            keys = list(order.expressions) if isinstance(order, exp.Order) else []
            if not _total(sub, keys, known, unique, True):
                return "ARRAY(subquery) without an ORDER BY on a whole primary key"
    return None


def _key_exprs(order: exp.Order) -> list[exp.Expr]:
    """The keys of an ORDER BY, an ordinal or an output alias of its block as that output."""
    select = order.parent if isinstance(order.parent, exp.Select) and order.arg_key == "order" else None
    outputs = select.expressions if select is not None else []
    aliases = {e.alias.casefold(): e.unalias() for e in outputs if isinstance(e, exp.Alias)}
    out: list[exp.Expr] = []
    for node in order.expressions:
        key = node.this if isinstance(node, exp.Ordered) else node
        if isinstance(key, exp.Literal) and key.is_int and 0 < int(key.name) <= len(outputs):
            key = outputs[int(key.name) - 1].unalias()
        elif isinstance(key, exp.Column) and not key.table:
            key = aliases.get(key.name.casefold(), key)
        out.append(key)
    return out


def _masked_order(query: exp.Expr, policy: MaskPolicy) -> str | None:
    """The masked column (by a rule's column name) an ORDER BY, PARTITION BY or DISTINCT ON of
    `query` orders or groups on, described; None."""
    patterns = [rule.column for rule in policy.rules]
    keys = [k for order in query.find_all(exp.Order) for k in _key_exprs(order)]
    keys += [p for w in query.find_all(exp.Window) for p in w.args.get("partition_by") or []]
    keys += [d.args["on"] for d in query.find_all(exp.Distinct) if isinstance(d.args.get("on"), exp.Expr)]
    for key in keys:
        for column in key.find_all(exp.Column):
            if any(fnmatchcase(column.name.casefold(), p) for p in patterns):
                return f"it orders on masked column {column.name}"
    return None


def _row_order(query: exp.Expr, dialect: str, volatile: frozenset[str]) -> str | None:
    """The call of `query` whose value changes from row to row in evaluation order (`row_order_call`,
    the per-call analysis's own test, or a volatile function of the catalog: `volatile`), described:
    it numbers the rows in scan order (red team rt27 F4, F5)."""
    for func in query.find_all(exp.Func):
        name = row_order_call(func, dialect, volatile)
        if name is not None:
            return f"it calls {name}, whose value changes from row to row in the order rows are read"
    return None


def _position(query: exp.Expr, positions: frozenset[str]) -> str | None:
    """The system column of `positions` (a row's physical position or write order) `query` reads."""
    for column in query.find_all(exp.Column):
        if column.name.casefold() in positions:
            return f"it reads system column {column.name}, which follows the rows' physical order"
    return None


def _without_params(query: exp.Expr, params: frozenset[str]) -> exp.Expr:
    """A function body with its arguments (`$1`, or by name) as NULL: they are not columns."""
    for node in list(query.find_all(exp.Parameter, exp.Placeholder, exp.Column)):
        if isinstance(node, exp.Column) and (node.table or node.name.casefold() not in params):
            continue
        if node.parent is not None:
            node.replace(exp.Null())
    return query


def order_reason(
    statement: str,
    dialect: str,
    known: KnownSchema,
    policy: MaskPolicy,
    unique: KeyLookup,
    params: frozenset[str] = frozenset(),
    aggregates: frozenset[str] = frozenset(),
    positions: frozenset[str] = frozenset(),
    one_row: bool = False,
    volatile: frozenset[str] = frozenset(),
    scalars: frozenset[str] = frozenset(),
) -> str | None:
    """Why the stored query `statement` follows a masked scan order or orders on a masked column,
    or None when its answer depends on neither. `positions`: the engine's system columns that
    tell a row's physical position (`StoredQuery.positions`), which count wherever they are read.
    `one_row`: only the first row of the last statement is kept (`StoredQuery.one_row`).
    `volatile`: the catalog's functions whose value may change from row to row (`StoredQuery.volatile`).
    `scalars`: user functions known to return one value; any other may return a set (rt27 F8).

    >>> known = KnownSchema({"c": {"id": "INT", "email": "TEXT"}}, "postgres")
    >>> policy = MaskPolicy.of(["c.email"])
    >>> pk = lambda schema, table: [frozenset({"id"})]
    >>> order_reason("SELECT id FROM c LIMIT 3", "postgres", known, policy, pk)
    'LIMIT, OFFSET or FETCH without an ORDER BY on a whole primary key'
    >>> order_reason("SELECT id FROM c ORDER BY id LIMIT 3", "postgres", known, policy, pk) is None
    True
    """
    try:
        parsed = [
            normalize_identifiers(t, dialect=read_dialect(dialect))  # as the engine folds names (rt27 F3)
            for t in sqlglot.parse(statement, read=read_dialect(dialect))
            if t is not None
        ]
    except (SqlglotError, RecursionError, ValueError) as exc:
        return f"its SQL cannot be parsed, so its order cannot be checked ({type(exc).__name__})"
    queries = [t for t in parsed if isinstance(t, exp.Query)]
    # as written, after the tree's reasons: `TABLESAMPLE BERNOULLI (50)` names the volatile handler
    written = written_call(statement, dialect, volatile)
    called = (
        None
        if written is None
        else f"it calls {written}, whose value changes from row to row in the order rows are read"
    )
    if not queries:
        return called or "it holds no query this check can read, so its order cannot be checked"
    folded = frozenset(p.casefold() for p in params)
    for each in queries:
        mark_opaque(each, dialect, scalars)  # a user's call may return a set (rt27 F8, F9)
    if one_row and parsed[-1] is queries[-1]:
        queries[-1] = first_row(queries[-1], known, unique, folded)
    for stored in queries:
        query = inline_windows(_without_params(stored, folded))  # `OVER w` checked as written inline
        found = (
            _position(query, positions)
            or _row_order(query, dialect, volatile)
            or _masked_order(query, policy)
            or numbering(query)
            or _scan_order(query, known, unique, aggregates)
            or first_scanned(query, dialect, known)  # bare column, DISTINCT's ORDER BY (rt33b)
        )
        if found:
            return found
    return called


def _reads(statement: str, dialect: str, known: KnownSchema) -> set[tuple[str, str, str]]:
    """What a stored query reads, case-folded: ("view", schema, relation) for each relation
    (unqualified: as resolved) and ("function", "", name) for each call of a function sqlglot does
    not know (a user's)."""
    try:
        trees = [t for t in sqlglot.parse(statement, read=read_dialect(dialect)) if t is not None]
    except (SqlglotError, RecursionError, ValueError):
        return set()
    found = {
        ("view", (known.schema_of(t) or "").casefold(), t.name.casefold())
        for tree in trees
        for t in tree.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier)
    }
    calls = {("function", "", f.name.casefold()) for tree in trees for f in tree.find_all(exp.Anonymous)}
    return found | calls


def _key(item: StoredQuery) -> tuple[str, str, str]:
    return (item.kind, item.schema.casefold() if item.kind == "view" else "", item.name.casefold())


def _reason(item: StoredQuery, dialect: str, known: KnownSchema, policy: MaskPolicy, unique: KeyLookup,
            volatile: frozenset[str], scalars: frozenset[str]) -> str | None:  # fmt: skip
    found = item.hidden
    for statement in item.statements if found is None else ():
        found = order_reason(
            statement,
            dialect,
            known,
            policy,
            unique,
            item.params,
            item.aggregates,
            item.positions,
            item.one_row,
            volatile,
            scalars,
        )
        if found:
            break
    return found


def _hand_on(items: list[StoredQuery], why: dict[int, str], reads: list[set[tuple[str, str, str]]]) -> None:
    changed = True
    while changed:  # a view over such a view or function hands its order on
        changed = False
        refused = {_key(items[i]): i for i in why}
        for i in range(len(items)):
            hit = next((refused[r] for r in sorted(reads[i]) if r in refused and refused[r] != i), None)
            if i not in why and hit is not None:
                shown = f"{items[hit].kind} {items[hit].schema}.{items[hit].name}"
                why[i] = f"it reads {shown}, which may answer in a masked scan order"
                changed = True


def order_reasons(
    stored: Iterable[StoredQuery], dialect: str, known: KnownSchema, policy: MaskPolicy, unique: KeyLookup
) -> list[tuple[StoredQuery, str]]:
    """Each usable view or function over a masked table whose answer follows a masked scan order
    (`order_reason`), reads a view that does, or whose stored SQL the account cannot read, with why.
    A call of a volatile function that is itself one of `stored` counts first as reading it (the
    reason it is refused is the better one); one that passes still counts as volatile after."""
    items = list(stored)
    checked = frozenset(item.name.casefold() for item in items if item.kind == "function")
    sets = {i.name.casefold() for i in items if i.kind == "function" and not i.one_row}
    scalars = frozenset(i.name.casefold() for i in items if i.one_row) - sets
    why: dict[int, str] = {}
    for i, item in enumerate(items):
        found = _reason(item, dialect, known, policy, unique, item.volatile - checked, scalars)
        if found:
            why[i] = found
    reads = [set().union(*(_reads(s, dialect, known) for s in item.statements)) for item in items]
    _hand_on(items, why, reads)
    for i, item in enumerate(items):
        if i not in why and item.volatile & checked:
            found = _reason(item, dialect, known, policy, unique, item.volatile, scalars)
            if found:
                why[i] = found
    _hand_on(items, why, reads)
    return [(item, why[i]) for i, item in enumerate(items) if i in why and item.usable]


def order_findings(
    stored: Iterable[StoredQuery], dialect: str, known: KnownSchema, policy: MaskPolicy, unique: KeyLookup
) -> list[Finding]:
    """`order_reasons` as start-up findings, each with its opt-in (`view-order:S.N`)."""
    return [
        Finding(
            f"masked-order-{item.kind}",
            f"{item.kind} {item.schema}.{item.name} may answer in the scan order of a masked table: {why}",
            item.fix(fix_hint(why)),
            item.opt_in,
        )
        for item, why in order_reasons(stored, dialect, known, policy, unique)
    ]
