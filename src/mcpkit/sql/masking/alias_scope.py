"""Which a name means where it is both an output alias and a column of the block's sources.

`SELECT DISTINCT (id IN (2, 5)) AS id FROM customers ORDER BY - CASE id WHEN 2 ...`: MariaDB takes a
bare ORDER BY item for the output alias, but a name inside an ORDER BY expression, or in GROUP BY,
for the FROM column first; the analysis (sqlglot's qualify) took it for the alias, so the DISTINCT
check saw an order by an output while the database ordered by the unselected `customers.id`, taken
from the first scanned row of each distinct value (red team rt35b F3, F3b: the masked e-mail ranking
in 11 calls). PostgreSQL and SQLite resolve those the same way (`_COLUMN_FIRST`); HAVING differs per
engine (MariaDB prefers a GROUP BY column, else the alias; PostgreSQL sees no aliases): an ambiguous
name there is refused. `pin_columns` qualifies each such name with its source, before the analysis,
so it reads what the database reads; the sent text is left as written (the database resolves it so).
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.masking.schema import KnownSchema
from mcpkit.sql.masking.taint import refuse_mask

__all__ = ["declared_name", "pin_columns", "pinned_columns"]

# Per dialect, the places where a name both an output alias and a source column means the column
# ("order": inside an ORDER BY expression, not a bare item; "group": GROUP BY); anywhere else
# listed in _AMBIGUOUS it is refused.
_COLUMN_FIRST: Final = {
    "postgres": frozenset({"order", "group"}),
    "mysql": frozenset({"order", "group"}),
    "sqlite": frozenset({"order", "group"}),
}
# Per dialect, whether a CTE's body sees only the earlier CTEs of a non-recursive WITH (SQLite's
# sees all of them, itself an error).
_CTES_IN_ORDER: Final = {"postgres": True, "mysql": True, "sqlite": False}
_AMBIGUOUS: Final = (
    "A name in this query's ORDER BY, GROUP BY or HAVING is both an output alias and a column of its "
    "tables, which databases resolve differently there; rename the alias or qualify the column."
)


def _names(select: exp.Select) -> set[str] | None:
    """The output names of `select`; None: not all known (`*`, or an unaliased expression, which
    the engine names after its text: MariaDB calls `(id)` `id`; red team v2 F4)."""
    names: set[str] = set()
    for projection in select.selects:
        if projection.is_star or not isinstance(projection, exp.Alias | exp.Column):
            return None
        names.add(projection.alias_or_name.casefold())
    return names


def _ctes(node: exp.Expr, dialect: str) -> dict[str, exp.CTE]:
    """The CTEs visible at `node`: inside a CTE's body only the earlier ones of its WITH (all of
    them WITH RECURSIVE, or on SQLite); `WITH customers AS (... FROM customers)` reads the table."""
    in_order = _CTES_IN_ORDER.get(dialect, False)
    found: dict[str, exp.CTE] = {}
    path: list[exp.Expr] = []
    while node is not None:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            if len(path) > 1 and path[-1] is with_ and in_order and not with_.args.get("recursive"):
                ctes = ctes[: next((i for i, c in enumerate(ctes) if c is path[-2]), len(ctes))]
            for cte in ctes:
                found.setdefault(cte.alias_or_name.casefold(), cte)
        path.append(node)
        node = node.parent  # type: ignore[assignment]
    return found


def _source_columns(
    select: exp.Select, dialect: str, known: KnownSchema | None
) -> list[tuple[str, set[str] | None]]:
    """Each direct source of `select`: its name in the block and its column names (None: unknown,
    so any name may be one of its columns; every table's without a schema)."""
    from_ = select.args.get("from_")
    sources = [from_.this] if isinstance(from_, exp.From) else []
    sources += [j.this for j in select.args.get("joins") or []]
    ctes = _ctes(select, dialect)
    out: list[tuple[str, set[str] | None]] = []
    while sources:
        source = sources.pop()
        # joins nested in a table (`FROM (a JOIN b ON ...)`) are sources of the block too
        sources += [j.this for j in source.args.get("joins") or [] if isinstance(j, exp.Join)]
        body: exp.Expr | None = source.this if isinstance(source, exp.Subquery) else None
        while isinstance(body, exp.Subquery) and body.args.get("alias") is None:
            sources += [j.this for j in body.args.get("joins") or [] if isinstance(j, exp.Join)]
            body = body.this  # `((a) JOIN (b) ON ...)`: the joins hang on the inner parentheses
        if isinstance(body, exp.Table) and source.args.get("alias") is None:
            sources.append(body)  # `FROM (customers)`: the block's own table (red team v2 F1)
            continue
        alias = source.args.get("alias")
        if isinstance(source, exp.Table) and not source.db and source.name.casefold() in ctes:
            cte = ctes[source.name.casefold()]
            body = cte.this
            if not (isinstance(alias, exp.TableAlias) and alias.columns):
                alias = cte.args.get("alias")  # `WITH d (id) AS (...)` names d's columns (red team v2 F3)
        if isinstance(alias, exp.TableAlias) and alias.columns:
            out.append((source.alias_or_name, {c.name.casefold() for c in alias.columns}))
            continue
        if isinstance(body, exp.Query):
            out.append((source.alias_or_name, _names(body) if isinstance(body, exp.Select) else None))
        elif isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            columns = None if known is None else known.columns(source)
            out.append((source.alias_or_name, None if columns is None else {c.casefold() for c in columns}))
        else:
            out.append((source.alias_or_name, None))  # a function table, VALUES, ...: any name may be its
    return out


def _shadowing(select: exp.Select) -> set[str]:
    """Output aliases that name something other than the same-named column itself."""
    out = set()
    for projection in select.selects:
        if not isinstance(projection, exp.Alias):
            continue
        value = projection.this
        if isinstance(value, exp.Column) and value.name.casefold() == projection.alias.casefold():
            continue  # `id AS id`, `c.id AS id`: either reading is the same value
        out.add(projection.alias.casefold())
    return out


def _places(select: exp.Select) -> list[tuple[str, exp.Expr]]:
    out: list[tuple[str, exp.Expr]] = []
    order = select.args.get("order")
    for ordered in order.expressions if isinstance(order, exp.Order) else []:
        key = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        if not isinstance(key.unnest(), exp.Column):  # a bare (or parenthesised) item is the alias
            out.append(("order", key))
    group = select.args.get("group")
    out += [("group", key) for key in (group.expressions if isinstance(group, exp.Group) else [])]
    having = select.args.get("having")
    if having is not None:
        out.append(("having", having))
    return out


def pin_columns(tree: exp.Expr, dialect: str, known: KnownSchema) -> None:
    """Qualify, in place, each name that is both an output alias and a source column where the
    database reads the column (module doc); refuse one where engines differ."""
    found = pinned_columns(tree, dialect, known)
    if found is not None:
        refuse_mask(found, message=_AMBIGUOUS)


def pinned_columns(tree: exp.Expr, dialect: str, known: KnownSchema | None) -> str | None:
    """`pin_columns` for stored SQL too: qualifies in place, and answers the ambiguity found,
    described (None: none). Without a schema a name may be a column of any table."""
    first = _COLUMN_FIRST.get(dialect, frozenset())
    for select in list(tree.find_all(exp.Select)):
        aliases = _shadowing(select)
        if not aliases:
            continue
        sources = _source_columns(select, dialect, known)
        for place, node in _places(select):
            for col in list(node.find_all(exp.Column)):
                name = col.name.casefold()
                if col.table or name not in aliases or col.find_ancestor(exp.Select) is not select:
                    continue
                owners = [s for s, columns in sources if columns is None or name in columns]
                if not owners:
                    continue  # the alias alone
                if place not in first or len(owners) != 1:
                    return f"{col.name} is both an output alias and a column in {place}"
                col.set("table", exp.to_identifier(owners[0]))
    return None


def declared_name(projection: exp.Expr) -> str:
    """The name the database shows for `projection` ("" when not certain): a column list of the CTE
    or derived table its block is the body of renames it (red team v4 L3: `WITH RECURSIVE r(n, m) AS
    (SELECT id, name ...) SELECT * FROM r` was planned as `id, name` and its answer withheld)."""
    select = projection.parent
    node: exp.Expr | None = select
    while node is not None and (
        isinstance(node.parent, exp.SetOperation)
        or (isinstance(node.parent, exp.Subquery) and not node.parent.alias)
    ):
        node = node.parent
    holder = node.parent if node is not None else None
    if (
        isinstance(select, exp.Select)
        and isinstance(holder, exp.CTE | exp.Subquery)
        and holder.alias_column_names
    ):
        names, index = holder.alias_column_names, select.selects.index(projection)
        if index < len(names):  # a shorter list renames the first outputs only
            return names[index]
    if isinstance(projection, exp.Alias):
        return projection.alias
    if isinstance(projection, exp.Column) and not isinstance(projection.this, exp.Star):
        return projection.name
    return ""
