"""How `bound_searches` reads operators: an operator's bound by name whatever its schema, and a
quantified search (`a LIKE ANY (ARRAY[...])`) spread into one search per value."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.admission.function_tables import SearchBounds, SizeBound
from mcpkit.sql.errors import refuse

__all__ = ["bound_of", "operator_bound", "spread_quantified"]


def operator_bound(node: exp.Operator, bounds: SearchBounds) -> SizeBound | None:
    """The bound of `a OPERATOR(schema.op) b`, known by name whatever the schema; None when cheap.
    Another operator outside the built-in schema is refused: its cost is unknown (an extension's
    C function may search for minutes with no interrupt check, as pg_trgm's `<<->` did)."""
    written = str(node.args.get("operator") or "").replace(" ", "")
    schema, _, name = written.rpartition(".")
    if name not in bounds.operators and schema.lower() not in ("", bounds.builtin_schema):
        refuse(
            "function",
            f"OPERATOR({written[:64]}) is not an operator this server knows the cost of; write the"
            " operator without OPERATOR(...) or use a function.",
        )
    return bounds.operators.get(name)


def bound_of(node: exp.Expr, bounds: SearchBounds) -> SizeBound | None:
    """The bound of a LIKE, an operator, or an infix node an engine names as an operator."""
    if isinstance(node, exp.Like | exp.ILike):
        return bounds.like if isinstance(node, exp.Like) else bounds.ilike
    if isinstance(node, exp.Operator):
        return operator_bound(node, bounds)
    name = bounds.infix.get(type(node))
    return bounds.operators.get(name) if name is not None else None


def spread_quantified(tree: exp.Expr, bounds: SearchBounds) -> None:
    """`a LIKE ANY (ARRAY[p, q])` becomes `(a LIKE p OR a LIKE q)` (ALL: AND), the same answer with
    each pattern a search of its own to bound, and so does any bounded operator (`a % ANY (...)`);
    a quantified search over anything else (a subquery, an array column) has operands the SQL
    cannot size, and is refused (red team pg14 F10)."""
    for node in list(tree.find_all(exp.Like, exp.ILike, exp.Operator, *bounds.infix)):
        quantified = node.args.get("expression")
        if not isinstance(quantified, exp.Any | exp.All) or bound_of(node, bounds) is None:
            continue
        inner = quantified.this.unnest() if isinstance(quantified.this, exp.Expr) else None
        while isinstance(inner, exp.Cast):  # ARRAY[...]::text[]
            inner = inner.this.unnest()
        if not isinstance(inner, exp.Array) or isinstance(node.parent, exp.Escape):
            what, of, instead = (
                ("LIKE", "patterns", "LIKE ... OR LIKE ...")
                if isinstance(node, exp.Like | exp.ILike)
                else ("A string search operator over", "values", "a op x OR a op y")
            )
            refuse(
                "too_complex",
                f"{what} ANY/ALL is answered over an ARRAY[...] of {of} only (the size of those from a"
                f" subquery or a column cannot be bounded); write {instead} instead.",
            )
        if not inner.expressions:
            continue
        parts = []
        for value in inner.expressions:  # `a NOT LIKE ANY (...)`: each part keeps the NOT
            part = node.copy()
            part.set("expression", value.copy())
            parts.append(part)
        join = exp.or_ if isinstance(quantified, exp.Any) else exp.and_
        node.replace(exp.Paren(this=join(*parts, copy=False)))
