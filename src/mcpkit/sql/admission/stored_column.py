"""Whether a cast's operand is a stored column: one a cast guard may leave as written."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["stored_column"]


def stored_column(value: exp.Expr) -> bool:
    """Whether `value` is a column of a table (or view) its SELECT reads, not of a CTE, derived
    table, LATERAL subquery, VALUES list or function in its FROM, nor of an outer query (or a scalar
    subquery answering such a column, as `similar_rows` reads a stored vector): only such
    a column holds stored text, any other may stand for text the query computes (red team pg17 F3:
    `WITH c AS (SELECT repeat('x', 5e7) AS v) SELECT v::int FROM c`)."""
    column = value.unnest()
    if isinstance(column, exp.Select):  # (SELECT e FROM t ...)
        selects = column.selects
        return len(selects) == 1 and stored_column(selects[0].unalias())
    select = column.find_ancestor(exp.Select) if isinstance(column, exp.Column) else None
    if not isinstance(column, exp.Column) or select is None:
        return False
    sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
    named = {
        s.alias_or_name.casefold(): s for s in (getattr(j, "this", None) for j in sources) if s is not None
    }
    table = column.table.casefold()
    found = [named[table]] if table in named else [] if table else list(named.values())
    return bool(found) and all(_stored(s) for s in found)


def _stored(source: exp.Expr) -> bool:
    if (
        not isinstance(source, exp.Table)
        or not isinstance(source.this, exp.Identifier)
        or source.args.get("rows_from")
    ):
        return False
    if source.db:
        return True
    name, node = source.name.casefold(), source.parent
    while node is not None:  # a bare name: the nearest WITH defining it is a CTE
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With) and any(c.alias_or_name.casefold() == name for c in with_.expressions):
            return False
        node = node.parent
    return True
