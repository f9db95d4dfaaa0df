"""Whether a cast's operand is a stored column: one a cast guard may leave as written."""

from __future__ import annotations

from typing import Final

from sqlglot import exp

__all__ = ["stored_column"]

_MAX_DEPTH: Final = 16  # CTEs and derived tables passing a column on; past it, the column is guarded


def stored_column(value: exp.Expr) -> bool:
    """Whether `value` is a column of a table (or view) its SELECT reads, directly or passed on
    unchanged by CTEs and derived tables (`WITH x AS (SELECT created_at FROM t)`), or a scalar
    subquery answering one (as `similar_rows` reads a stored vector). Not a column computed by a
    CTE, derived table, LATERAL subquery, VALUES list or function in a FROM, nor of an outer query:
    any of those may stand for text the query computes (red team pg17 F3: `WITH c AS (SELECT
    repeat('x', 5e7) AS v) SELECT v::int FROM c`)."""
    column = value.unnest()
    if isinstance(column, exp.Select):  # (SELECT e FROM t ...)
        selects = column.selects
        return len(selects) == 1 and stored_column(selects[0].unalias())
    select = column.find_ancestor(exp.Select) if isinstance(column, exp.Column) else None
    if not isinstance(column, exp.Column) or select is None:
        return False
    return _resolves(select, column.table.casefold(), column.name.casefold(), 0)


def _resolves(select: exp.Select, table: str, name: str, depth: int) -> bool:
    """Whether `table.name` (`table` empty: unqualified) read in `select` is a stored column."""
    if depth > _MAX_DEPTH:
        return False
    joins = [select.args.get("from_"), *(select.args.get("joins") or [])]
    named = {
        s.alias_or_name.casefold(): s for s in (getattr(j, "this", None) for j in joins) if s is not None
    }
    found = [named[table]] if table in named else [] if table else list(named.values())
    if not table:  # the sources that may hold it: a derived table or CTE that does not output it is not one
        found = [s for s in found if _outputs(s, name) is not False]
    return bool(found) and all(_stored(s, name, depth) for s in found)


def _body(source: exp.Expr) -> tuple[exp.Expr, exp.Expr | None] | None:
    """The SELECT a derived table or CTE reference stands for, with its alias (column list), or
    None for a table; a source that is neither (VALUES, a function, LATERAL) answers itself."""
    if isinstance(source, exp.Subquery):
        return source.this, source.args.get("alias")
    if not isinstance(source, exp.Table) or source.db:
        return None
    name, node = source.name.casefold(), source.parent
    while node is not None:  # a bare name: the nearest WITH defining it is a CTE
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if isinstance(cte, exp.CTE) and cte.alias_or_name.casefold() == name:
                    return cte.this, cte.args.get("alias")
        node = node.parent
    return None


def _produced(body: exp.Expr, alias: exp.Expr | None, name: str) -> list[exp.Expr] | None:
    """The projections of `body` that output `name` (None: `body` is no plain SELECT)."""
    if not isinstance(body, exp.Select):
        return None
    selects = body.selects
    renamed = [c.name.casefold() for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    if renamed:
        at = renamed.index(name) if name in renamed else len(selects)
        return [selects[at]] if at < len(selects) and not isinstance(selects[at], exp.Star) else []
    return [p for p in selects if p.alias_or_name.casefold() == name or isinstance(p, exp.Star)]


def _outputs(source: exp.Expr, name: str) -> bool | None:
    """Whether a derived table or CTE outputs `name` (None: a table, or not known)."""
    body = _body(source)
    produced = _produced(*body, name) if body is not None else None
    return None if produced is None else bool(produced)


def _stored(source: exp.Expr, name: str, depth: int) -> bool:
    if isinstance(source, exp.Table) and (
        not isinstance(source.this, exp.Identifier) or source.args.get("rows_from")
    ):
        return False  # a set-returning function
    body = _body(source)
    if body is None:
        return isinstance(source, exp.Table)
    produced = _produced(*body, name)
    if not produced or len(produced) > 1 or not isinstance(body[0], exp.Select):
        return False
    inner = produced[0].unalias()
    if isinstance(inner, exp.Star):  # `SELECT *`: the column its own sources hold
        return _resolves(body[0], "", name, depth + 1)
    if isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star):  # `SELECT t.*`
        return _resolves(body[0], inner.table.casefold(), name, depth + 1)
    return isinstance(inner, exp.Column) and _resolves(
        body[0], inner.table.casefold(), inner.name.casefold(), depth + 1
    )
