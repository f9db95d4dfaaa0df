"""The expressions a derived table's, CTE's or VALUES list's column stands for (out of `masking.alike`)."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["defining", "set_branches"]


def defining(col: exp.Column) -> list[exp.Expr]:
    """The expressions defining `col` of a derived table or CTE (one per UNION branch), or []."""
    select = col.find_ancestor(exp.Select)
    if select is None or not col.table:
        return []
    inner: exp.Expr | None = None
    named: exp.Expr | None = None  # the derived table or CTE, whose alias may list column names
    for source in [select.args.get("from_"), *(select.args.get("joins") or [])]:
        this = source.this if source is not None else None
        if isinstance(this, exp.Values) and this.alias_or_name == col.table:
            return _values_column(this, col.name)
        if isinstance(this, exp.Subquery) and this.alias_or_name == col.table:
            inner, named = this.this, this
        elif isinstance(this, exp.Table) and this.alias_or_name == col.table and not this.db:
            withs = [w for w in (a.args.get("with_") for a in _ancestors(select)) if isinstance(w, exp.With)]
            for with_ in withs:
                for cte in with_.expressions:
                    if cte.alias_or_name == this.name and inner is None:
                        inner, named = cte.this, cte  # the innermost WITH of that name (rt36 F3)
    found = set_branches(inner) if inner is not None else []
    branches = [b for b in found if isinstance(b, exp.Select)]
    if not branches or len(branches) != len(found):
        return []  # VALUES and the like: untraced, so not one-way
    widths = {len(b.selects) for b in branches}
    if len(widths) != 1 or any(p.is_star for b in branches for p in b.selects):
        return []
    # `AS t(a, b)` names the columns, else the first branch; every branch is read by position (red team v1 F3)
    alias = named.args.get("alias") if named is not None else None
    listed = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) and alias.columns else []
    names = listed + [p.alias_or_name for p in branches[0].selects][len(listed) :]
    places = [i for i, name in enumerate(names) if name == col.name]
    if len(places) != 1:
        return []
    return [b.selects[places[0]].unalias() for b in branches]


def _values_column(values: exp.Values, name: str) -> list[exp.Expr]:
    """Column `name` of `(VALUES ...) AS v(a, b)`, one value per row, or [] (red team v4 L2: `(VALUES (1))
    AS v(a) UNION SELECT id ...` was refused as a dedup over values that may print differently)."""
    alias = values.args.get("alias")
    names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    rows = [r.expressions if isinstance(r, exp.Tuple) else [r] for r in values.expressions]
    if names.count(name) != 1 or any(len(r) != len(names) for r in rows):
        return []
    return [r[names.index(name)] for r in rows]


def set_branches(node: exp.Expr) -> list[exp.Expr]:
    """Every branch of a set operation, however deep sqlglot nests `A UNION B UNION C` (review)."""
    if isinstance(node, exp.SetOperation):
        return set_branches(node.this) + set_branches(node.expression)
    return set_branches(node.this) if isinstance(node, exp.Subquery) else [node]


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    out, parent = [], node.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return [node, *out]
