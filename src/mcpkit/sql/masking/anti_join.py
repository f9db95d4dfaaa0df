"""Outer joins read as anti-joins: the inner side's scan stops at its first match.

`a LEFT JOIN b ON p WHERE b.id IS NULL` keeps the rows of a without a match in b; MariaDB ("Not
exists"), PostgreSQL (an anti join) and SQLite stop scanning b for a row of a at the first row
matching p. An error p raises on row y of b, answered or not, tells whether row x matching p was
scanned first, and b's scan can follow an index on a masked column (red team v2 F2: `LEFT JOIN
customers b ON b.id + 0 IN (x, y) AND CASE WHEN b.id = x THEN 1 ELSE 1 / (b.id - y) END WHERE
b.id IS NULL`, the masked ranking in n log n calls). It is not an EXISTS subquery, so
`early_stop` cannot order it: such a join whose null-filled side reads a masked table is refused
unless its ON cannot fail per row (`_SAFE_ON`): plain comparisons of columns and constants on
PostgreSQL and SQLite, only equalities of two columns on MariaDB, where comparing across types
(`b.name = 0`) raises a conversion warning, made an error per call. The WHERE's conjuncts that
read that side are held to the same (besides IS NULL tests: they run on the first matching row),
and that side must be a table (a view's, CTE's or derived table's columns may compute per row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sqlglot import exp

from mcpkit.sql.masking.first_row import cte_for
from mcpkit.sql.masking.policy import MaskPolicy
from mcpkit.sql.masking.schema import KnownSchema
from mcpkit.sql.masking.taint import refuse_mask

__all__ = ["refuse_anti_joins"]

_PLAIN: Final = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.And, exp.Or, exp.Not,
    exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ, exp.Is, exp.LT, exp.LTE, exp.GT, exp.GTE,
    exp.Between, exp.In, exp.Tuple,
)  # fmt: skip


def _plain(on: exp.Expr) -> bool:
    return all(isinstance(n, _PLAIN) for n in on.walk())


def _column_equalities(on: exp.Expr) -> bool:
    if isinstance(on, exp.Paren | exp.And):
        return all(_column_equalities(part) for part in on.iter_expressions())
    return isinstance(on, exp.EQ | exp.NullSafeEQ) and all(
        isinstance(side, exp.Column) for side in (on.this, on.expression)
    )


# Per dialect: an ON that raises nothing per row (module doc); unknown dialects: the strictest.
_SAFE_ON: Final[dict[str, Callable[[exp.Expr], bool]]] = {
    "postgres": _plain,
    "sqlite": _plain,
    "mysql": _column_equalities,
}
_ANTI_JOIN: Final = (
    "Over a table with masked columns, an outer join tested with IS NULL whose ON or WHERE computes per "
    "row on the joined table (a function, arithmetic, CASE, a cast, a comparison across types), or "
    "that joins a view, CTE or derived table, is not answered: the rows it reads before the first "
    "match follow the storage order; join a table on equal columns, or use NOT EXISTS."
)


def _null_tested(tree: exp.Expr) -> bool:
    """Whether the query tests a value against NULL anywhere (IS NULL, `<=> NULL`, ISNULL(); an outer
    query's test of a derived table's column counts: MariaDB merges it), so a join may be an anti-join."""
    return any(
        isinstance(n, exp.Null) or (isinstance(n, exp.Anonymous) and n.name.casefold() == "isnull")
        for n in tree.walk()
    )


def _reads_masked(source: exp.Expr, known: KnownSchema, policy: MaskPolicy) -> bool:
    """Whether a join's source may read a masked table's rows (a view, CTE or table function may)."""
    for table in source.find_all(exp.Table):
        columns = known.columns(table) if isinstance(table.this, exp.Identifier) else None
        if columns is None or table.name.casefold() in known.views:
            return True
        where = known.schema_of(table)
        if policy.masked_columns(where, table.name, columns) or policy.reads_masked(where, table.name):
            return True
    return False


def _base_table(source: exp.Expr, known: KnownSchema) -> bool:
    """A table of the schema itself: no view, CTE, derived or function table (whose columns may
    compute per row: `LEFT JOIN (SELECT id, 1 / (id - y) AS x FROM customers) b ON b.x = o.id`)."""
    return (
        isinstance(source, exp.Table)
        and isinstance(source.this, exp.Identifier)
        and source.name.casefold() not in known.views
        and cte_for(source) is None
    )


def _null_test(node: exp.Expr) -> bool:
    node = node.unnest()
    while isinstance(node, exp.Not):
        node = node.this.unnest()
    tests = exp.Is | exp.NullSafeEQ | exp.NullSafeNEQ
    return (
        isinstance(node, tests)
        and isinstance(node.this, exp.Column)
        and isinstance(node.expression, exp.Null)
    )


def _where_stops(where: exp.Expr | None, names: set[str] | None, safe: Callable[[exp.Expr], bool]) -> bool:
    """Whether a conjunct of WHERE reading the null-filled side (`names`; an unqualified column may;
    None: any column, in an enclosing block) can fail per row: it is evaluated on the first matching
    row, then the scan stops."""
    if where is None:
        return False
    for part in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        columns = list(part.find_all(exp.Column))
        reads = any(names is None or not c.table or c.table.casefold() in names for c in columns)
        if reads and not (_null_test(part) or safe(part)):
            return True
    return False


_SOURCES: Final = frozenset({"from_", "joins", "with_"})  # where a block's derived tables and CTEs are


def _enclosing(select: exp.Select) -> list[exp.Select]:
    """The blocks `select` is a derived table or CTE of, innermost first (their WHERE may be merged
    into it); a subquery in a WHERE, select list or HAVING ends the chain: no conjunct of that block
    can read its columns."""
    out: list[exp.Select] = []
    node: exp.Expr = select
    while True:
        while node.parent is not None and not isinstance(node.parent, exp.Select):
            node = node.parent
        parent = node.parent
        if not isinstance(parent, exp.Select) or node.arg_key not in _SOURCES:
            return out
        out.append(parent)
        node = parent


def refuse_anti_joins(tree: exp.Expr, dialect: str, known: KnownSchema, policy: MaskPolicy) -> None:
    """Refuse an outer join of `tree` that may stop at a first match (module doc)."""
    safe = _SAFE_ON.get(dialect, _column_equalities)
    if not _null_tested(tree):
        return
    for select in tree.find_all(exp.Select):
        joins = [j for j in select.find_all(exp.Join) if j.find_ancestor(exp.Select) is select]
        outer = [j for j in joins if (j.side or "").upper() in ("LEFT", "RIGHT", "FULL")]
        from_ = select.args.get("from_")
        every = [from_.this] if isinstance(from_, exp.From) else []
        every += [j.this for j in joins]
        for join in outer:
            filled = [join.this] if (join.side or "").upper() == "LEFT" else every
            masked = [source for source in filled if _reads_masked(source, known, policy)]
            if not masked:
                continue
            on = join.args.get("on")
            names = {source.alias_or_name.casefold() for source in masked}
            if (
                not all(_base_table(source, known) for source in masked)
                or (on is not None and not safe(on))  # None: USING, NATURAL (equal columns)
                or _where_stops(select.args.get("where"), names, safe)
                or any(_where_stops(b.args.get("where"), None, safe) for b in _enclosing(select))
            ):
                refuse_mask(f"{join.side} JOIN tested IS NULL that computes per row", message=_ANTI_JOIN)
