"""What merging a chain of subqueries costs PostgreSQL's planner, before it runs (red team rt33a F4).

PostgreSQL pulls each CTE read once, and each derived table, up into the query that reads it,
replacing the columns of every level above by the pulled target list: a chain of `depth` such
levels each `width` columns wide costs about width x depth^2 / 2 column substitutions, with no
interrupt check. `WITH t0 AS (SELECT <600 columns> ...), t1 AS (SELECT * FROM t0), ..., t147`
(11 KB, under every other bound) kept a backend planning 21 s past a 1 s `statement_timeout`;
measured on PostgreSQL 15 here about 2 microseconds per unit (depth 37 x 600 columns: 1.2 s,
depth 148 x 30: 1.3 s). `merge_work` sums, over the query's scopes, the scope's width (a `*`
counted as what it reads: a CTE's or derived table's width; a table's column count when the
catalog is a `ColumnCatalog`, `TABLE_STAR` otherwise) times the length of the longest chain of
scopes reading it from the top; the budget per engine is `function_tables.tables.MERGE_WORK`
(PostgreSQL 200,000: about half a second of planning).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final, Protocol, runtime_checkable

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, build_scope

__all__ = ["TABLE_STAR", "merge_work"]

TABLE_STAR: Final = 64
"""Columns a `*` over a table (or view) counts for when the catalog does not say."""

_Ref = tuple[str | None, str]  # (schema or None, name), case-folded: `limit_expansion.RelationRef`


@runtime_checkable
class _ColumnCatalog(Protocol):  # as `reject_attribute_calls.ColumnCatalog`
    def relation_columns(self, refs: Collection[_Ref]) -> Mapping[_Ref, frozenset[str] | None]: ...


def _ref(table: exp.Table) -> _Ref:
    return (table.db.casefold() or None, table.name.casefold())


def _table_width(source: object, known: Mapping[_Ref, frozenset[str] | None]) -> int:
    columns = known.get(_ref(source)) if isinstance(source, exp.Table) else None
    return len(columns) if columns else TABLE_STAR


def _width(scope: Scope, widths: dict[int, int], known: Mapping[_Ref, frozenset[str] | None]) -> int:
    key = id(scope)
    if key in widths:
        return widths[key]
    widths[key] = 1  # a recursive CTE reads itself
    expression = scope.expression
    select = expression if isinstance(expression, exp.Select) else expression.find(exp.Select)
    total = 0
    for column in select.selects if isinstance(select, exp.Select) else []:
        star = isinstance(column, exp.Star) or (isinstance(column, exp.Column) and column.is_star)
        if not star:
            total += 1
            continue
        read = {n: source for n, (_, source) in scope.selected_sources.items()}
        name = column.table if isinstance(column, exp.Column) else ""
        sources = [read.get(name)] if name else list(read.values())
        total += sum(
            _width(s, widths, known) if isinstance(s, Scope) else _table_width(s, known) for s in sources
        )
    widths[key] = total
    return total


def merge_work(tree: exp.Expr, catalog: object = None) -> int:
    """Width x chain length summed over the scopes of `tree` (0 when it cannot be scoped); with a
    catalog that has `relation_columns` (PostgreSQL's), a `*` over a table counts its columns."""
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        return 0
    if root is None:
        return 0
    order = list(root.traverse())  # each scope after the scopes it holds; a CTE after those it reads
    chains: dict[int, int] = {id(root): 1}
    for scope in reversed(order):
        length = chains.get(id(scope), 1)
        for _, source in scope.selected_sources.values():
            if isinstance(source, Scope) and source is not scope:
                chains[id(source)] = max(chains.get(id(source), 1), length + 1)
    known: Mapping[_Ref, frozenset[str] | None] = {}
    if isinstance(catalog, _ColumnCatalog):
        tables = {
            _ref(t)
            for s in order
            for _, t in s.selected_sources.values()
            if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier)
        }
        known = catalog.relation_columns(tables) if tables else {}
    widths: dict[int, int] = {}
    return sum(_width(s, widths, known) * chains.get(id(s), 1) for s in order)
