"""Which rows a LIMIT reads over a masked read: ordered by visible keys, or refused.

A LIMIT stops the scan at the last row it keeps, so every row the WHERE is evaluated on must be
picked by visible values. Ordered by constant outputs alone (`SELECT 1 ... LIMIT 1`) the engine
drops the sort, and an error the WHERE raises on one row tells whether that row was scanned before
the row kept: a comparison sort of the masked ranking (red team rt20mask F1). So a limited block
is ordered, after its outputs, by the visible columns of its rows (`ties._scope_keys`, as a
window is); one whose rows no visible column tells apart is refused.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from mcpkit.sql.masking.taint import Taint
from mcpkit.sql.masking.ties import BLOCK, _aggregated, _scope_keys, _source_names, refuse_order

__all__ = ["Keyed", "block_keys", "row_keys"]

Keyed = dict[int, list[exp.Expr] | None]  # per SELECT marker: its visible keys (None: none)

_UNKEYED: Final = (
    "Over a table with masked columns, LIMIT, OFFSET and FETCH need rows told apart by visible "
    "columns: select or order by a unique visible key such as the primary key, and name every "
    "derived table."
)


def _reads_row(scope: Scope, output: exp.Expr) -> bool:
    """An output that names a column of a row of `scope` (a table's, a derived table's non-constant)."""
    for col in output.find_all(exp.Column):
        source = scope.sources.get(col.table)
        if isinstance(source, exp.Table):
            return True
        if isinstance(source, Scope) and isinstance(source.expression, exp.Select):
            inner = [p for p in source.expression.selects if p.alias_or_name == col.name]
            if any(p.find(exp.Column) for p in inner):
                return True
    return False


def _all_masked(scope: Scope) -> bool:
    """Only base tables, every column masked: no expression tells their rows apart, so no WHERE
    can stop a scan anywhere the masked order says (a derived table's WHERE can: not this)."""
    return all(
        isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier)
        for _, source in scope.selected_sources.values()
    )


def _name(col: exp.Column) -> tuple[str, str]:
    return col.table.casefold(), col.name.casefold()


def _output_columns(select: exp.Select) -> set[tuple[str, str]]:
    outs = (p.this if isinstance(p, exp.Alias) else p for p in select.selects)
    return {_name(o) for o in outs if isinstance(o, exp.Column) and o.table}


def block_keys(taint: Taint, qualified: exp.Expr) -> Keyed:
    """Per SELECT (its `BLOCK` marker): the visible columns of its rows not already among its
    outputs (None: no visible column tells its rows apart). A LIMIT stops the scan at the last row it keeps,
    so every row the WHERE is evaluated on must be picked by visible values: ordered by outputs
    alone (`SELECT 1 ... LIMIT 1`) the engine drops the sort, and an error the WHERE raises on one
    row tells whether it came before the row kept (red team rt20mask F1)."""
    found: Keyed = {}
    for select in qualified.find_all(exp.Select):
        marker = select.meta.get(BLOCK)
        scope = taint.by_expr.get(id(select))
        if marker is None or scope is None:
            continue
        keys = _scope_keys(taint, scope, partial=True)
        if keys is None:  # ROLLUP, CUBE, GROUPING SETS: groups, aggregated from every row
            keys = []
        elif (
            not keys
            and select.args.get("group") is None
            and not _aggregated(select)
            and not _all_masked(scope)
        ):
            found[marker] = None  # nothing visible tells its rows apart
            continue
        shown = _output_columns(select)
        if select.args.get("distinct") is not None and not any(_reads_row(scope, c) for c in select.selects):
            found[marker] = None  # `SELECT DISTINCT 1 ... LIMIT 1`: the sort of a constant is dropped
            continue
        found[marker] = [k for k in keys if not (isinstance(k, exp.Column) and _name(k) in shown)]
    return found


def row_keys(select: exp.Select, blocks: Keyed) -> list[exp.Expr]:
    """The visible keys a limited block (`block_keys`) is ordered by after its outputs; refused
    where none tells its rows apart, or a key's source is not named in the block as sent."""
    keys = blocks.get(select.meta.get(BLOCK, -1), [])
    if keys is None:
        refuse_order(_UNKEYED, "LIMIT over rows no visible column tells apart")
    if select.args.get("distinct") is not None:
        return []  # its ORDER BY may name only outputs: a sort of them reads every row first
    names = {n.casefold() for n in _source_names(select)}
    if any(isinstance(k, exp.Column) and k.table.casefold() not in names for k in keys):
        refuse_order(_UNKEYED, "LIMIT over a source without a name to order by")
    return keys
