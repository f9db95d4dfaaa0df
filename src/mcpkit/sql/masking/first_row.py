"""Blocks of stored SQL: the one table a block reads, and the rows a non-SETOF function keeps.

A PostgreSQL SQL function that does not return a set keeps only the first row of its last query,
an implicit `LIMIT 1` without ORDER BY (red team rt24 F5): `first_row` writes that LIMIT in, unless
the block yields at most one row anyway, for `masking.view_order` to analyse.

A name in FROM is the catalog's table only when no WITH around it defines that name (red team
rt25 F2): `WITH customers AS (SELECT id AS real, 1 AS id FROM public.customers) ... ORDER BY id`
orders by the CTE's constant, not by the table's key. A block over a CTE, a derived table, or a
table renamed by a column list (`customers AS c(email, id)`) has no known key: its order counts
as unverifiable.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import inspect
from sqlalchemy.engine import Connection
from sqlglot import exp

from mcpkit.sql.masking.schema import KnownSchema
from mcpkit.sql.masking.set_rows import multiplies
from mcpkit.sql.profiles import profile_class

__all__ = [
    "Fold",
    "KeyLookup",
    "block_of",
    "cte_for",
    "first_row",
    "name_fold",
    "one_table",
    "own_name",
    "primary_keys",
]

KeyLookup = Callable[[str | None, str], list[frozenset[str]]]
"""(schema, table) -> its unique NOT NULL keys (primary key), each a set of column names as stored."""
Fold = Callable[[str], str]


def name_fold(known: KnownSchema) -> Fold:
    """How two column names (or qualifiers) of a parsed, identifier-normalised body compare: in any
    case where the engine's columns are caseless (`Profile.caseless_columns`: MariaDB), exactly
    otherwise (PostgreSQL folded unquoted names to lower case, `"ID"` kept: red team rt27 F3)."""
    return str.casefold if profile_class(known.dialect).caseless_columns else str


def cte_for(table: exp.Table) -> exp.CTE | None:
    """The CTE of a WITH around `table` named like it (case-folded; the nearest), or None.

    Any WITH whose scope holds the name counts, whichever of its CTEs may see which (a CTE's own
    name in its body, a later sibling, RECURSIVE): where the name might be the CTE's, it is not
    the catalog's table for certain. A qualified name (`public.customers`) never names a CTE.
    """
    if table.args.get("db") or table.args.get("catalog") or not isinstance(table.this, exp.Identifier):
        return None
    name = table.name.casefold()
    node = table.parent
    while node is not None:
        with_ = node.args.get("with_") if not isinstance(node, exp.With) else None
        if isinstance(with_, exp.With):
            for cte in reversed(with_.expressions):
                if isinstance(cte, exp.CTE) and cte.alias_or_name.casefold() == name:
                    return cte
        node = node.parent
    return None


def own_name(table: exp.Table) -> str:
    """The name a block's columns qualify its table with: its alias, else its name (case-folded)."""
    return table.alias_or_name.casefold()


def one_table(select: exp.Expr | None) -> exp.Table | None:
    """The one catalog table a block reads, or None: a join, a derived table, a CTE (or a name
    some WITH around it defines), or a table whose alias renames its columns."""
    if not isinstance(select, exp.Select) or select.args.get("joins") or select.args.get("laterals"):
        return None
    from_ = select.args.get("from_")
    source = from_.this if isinstance(from_, exp.From) else None
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        return None
    alias = source.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return None  # `customers AS c(email, id)`: `id` is the e-mail
    return None if cte_for(source) is not None else source


def block_of(node: exp.Expr) -> exp.Select | None:
    found = node.find_ancestor(exp.Select)
    return found if isinstance(found, exp.Select) else None


def _constant(node: exp.Expr, own: set[str], params: set[str]) -> bool:
    """Whether `node` is the same for every row of a one-table block: it reads no column of the table
    (a column qualified by another name is a function argument or an outer row's)."""
    for column in node.find_all(exp.Column):
        if column.table.casefold() in own if column.table else column.name.casefold() not in params:
            return False
    return True


def _single(query: exp.Query, known: KnownSchema, unique: KeyLookup, params: frozenset[str]) -> bool:
    """Whether a block yields at most one row: no FROM, an aggregate without GROUP BY, or a WHERE
    that pins a whole primary key of its one table to constants (`id = $1`); and no set-returning
    call in its select list, which answers all its rows (`set_rows.multiplies`, red team rt27 F8)."""
    if not isinstance(query, exp.Select) or query.args.get("group") or multiplies(query):
        return False
    if query.args.get("from_") is None:
        return True
    if any(
        block_of(agg) is query and agg.find_ancestor(exp.Window) is None
        for e in query.expressions
        for agg in e.find_all(exp.AggFunc)
    ):
        return True
    table, where = one_table(query), query.args.get("where")
    if table is None or not isinstance(where, exp.Where):
        return False
    fold = name_fold(known)
    own = {fold(table.alias_or_name)}  # the column pinned: the block's own (its alias, once aliased)
    near = {table.alias_or_name.casefold(), table.name.casefold()}  # read from either: not constant
    columns = known.columns(table)  # a column's name wins over an argument's; unknown: no argument
    args = set() if columns is None else set(params) - {c.casefold() for c in columns}
    cond = where.this.unnest()
    conjuncts = [c.unnest() for c in cond.flatten()] if isinstance(cond, exp.And) else [cond]
    pinned = {
        fold(column.name)
        for eq in conjuncts
        if isinstance(eq, exp.EQ)
        for column, other in ((eq.this, eq.expression), (eq.expression, eq.this))
        if isinstance(column, exp.Column)
        and (not column.table or fold(column.table) in own)
        and _constant(other.unnest(), near, args)
    }
    keys = unique(known.schema_of(table), table.name)
    return any(key and {fold(k) for k in key} <= pinned for key in keys)


def first_row(query: exp.Query, known: KnownSchema, unique: KeyLookup, params: frozenset[str]) -> exp.Query:
    """`query` as a non-SETOF function runs it: only its first row is kept, an implicit `LIMIT 1`."""
    if query.args.get("limit") is None and not _single(query, known, unique, params):
        query.set("limit", exp.Limit(expression=exp.Literal.number(1)))
    return query


def primary_keys(
    conn: Connection, read: Callable[[Connection, str | None, str], list[str]] | None = None
) -> KeyLookup:
    """A `KeyLookup` through `conn`, cached per table: `read` (the profile's `primary_key`, which
    reads the catalog as the reader may) or SQLAlchemy's inspector; a table it cannot inspect has
    no key."""
    inspector = inspect(conn)
    cache: dict[tuple[str | None, str], list[frozenset[str]]] = {}

    def unique(schema: str | None, table: str) -> list[frozenset[str]]:
        if (schema, table) not in cache:
            try:
                if read is not None:
                    names = read(conn, schema, table)
                else:
                    names = inspector.get_pk_constraint(table, schema=schema).get("constrained_columns") or []
            except Exception:  # not a table (a view), or not visible: no key, so no total order
                names = []
            cache[schema, table] = [frozenset(str(n) for n in names)] if names else []
        return cache[schema, table]

    return unique
