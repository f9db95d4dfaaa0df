"""Pass: no PostgreSQL attribute notation that calls a function (`(x).pg_sleep`, `t.nextval`, `o.f`)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Protocol, runtime_checkable

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, build_scope

from mcpkit.sql.admission.function_tables import matches
from mcpkit.sql.admission.limit_expansion import RelationRef
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.errors import refuse

__all__ = ["ColumnCatalog", "FunctionColumns", "reject_attribute_calls"]


@runtime_checkable
class ColumnCatalog(Protocol):
    """The database's relations and their column names (system columns too)."""

    def relation_columns(self, refs: Collection[RelationRef]) -> Mapping[RelationRef, frozenset[str] | None]:
        """The column names of each ref (schema, name as the engine folds them), None if unknown."""
        ...


@runtime_checkable
class FunctionColumns(Protocol):
    """The output columns of the functions a query reads in FROM (red team rt24 F3)."""

    def function_columns(self, ref: RelationRef) -> tuple[frozenset[str], bool]:
        """The column names every function `ref` can resolve to returns, and whether each returns
        one plain (non-composite, non-polymorphic) value, whose column is named after the alias."""
        ...


_MESSAGE = (
    "Attribute notation on an expression, such as (x).name or alias.function_name, is not allowed; "
    "call functions directly by name."
)


def reject_attribute_calls(
    tree: exp.Expr, dialect: str, functions: FunctionPolicy | None = None, catalog: object | None = None
) -> exp.Expr:
    """Refuse attribute notation that PostgreSQL may read as a function call.

    PostgreSQL reads `x.f` as `f(x)` for a composite `x`, so `(col).pg_sleep` calls pg_sleep
    although the tree holds no function node. Refuses a Dot on a parenthesised expression, a
    qualified name whose last part names a denied function, and (with a `ColumnCatalog`) `q.name`
    where `name` is no column of the relation, CTE or derived table `q` names: PostgreSQL calls
    `name(q)` then, any function of that name taking q's row type (red team rt23 F1).

    >>> import sqlglot
    >>> reject_attribute_calls(sqlglot.parse_one("SELECT t.a FROM t", read="postgres"), "postgres").sql()
    'SELECT t.a FROM t'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect; only PostgreSQL has attribute calls.
        functions: The policy whose denylist names the functions.
        catalog: The database's catalog; when it is a `ColumnCatalog`, qualified names are checked
            against the columns of what they qualify.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `attribute_call`.
    """
    if dialect != "postgres":
        return tree
    deny = (functions or FunctionPolicy.for_dialect(dialect)).deny
    exact = {p.rstrip("*") for p in deny}
    for node in tree.find_all(exp.Dot, exp.Column):
        if isinstance(node, exp.Dot):
            if isinstance(node.this, exp.Paren):
                refuse("attribute_call", _MESSAGE)
            last = node.expression
            if isinstance(last, exp.Identifier) and matches(last.name.lower(), deny):
                refuse("attribute_call", _MESSAGE)
        elif isinstance(node, exp.Column) and node.table and node.name.lower() in exact:
            # alias.name resolves to a column first; only an exact denied name is refused, so a
            # real column such as t.lo_limit is not caught by the `lo_*` pattern.
            refuse("attribute_call", _MESSAGE)
    if isinstance(catalog, ColumnCatalog):
        _check_columns(tree, catalog)
    return tree


def _folded(node: exp.Expr | None) -> str:
    """An identifier as PostgreSQL folds it: quoted as written, else lower case."""
    if not isinstance(node, exp.Identifier):
        return node.name.lower() if node is not None else ""
    return str(node.this) if node.quoted else str(node.this).lower()


def _source(scope: Scope, qualifier: str) -> tuple[Scope, exp.Expr | Scope] | None:
    """What `qualifier` names in `scope` or an enclosing one (a correlated reference)."""
    current: Scope | None = scope
    while current is not None:
        for alias, source in current.sources.items():
            if alias.lower() == qualifier.lower():
                return current, source
        current = current.parent
    return None


_Known = Mapping[RelationRef, frozenset[str] | None]


def _ref(table: exp.Table) -> RelationRef:
    return (_folded(table.args.get("db")) or None, _folded(table.this))


def _columns_of(source: exp.Expr | Scope, known: _Known, depth: int = 0) -> frozenset[str] | None:
    """The column names of a relation, CTE or derived table, or None when they are not known."""
    if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
        alias = source.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            # `customers x(id, email, nm)` renames the first columns: only the written names are sure
            # (a renamed column's old name is attribute notation again); columns past the list refuse.
            return frozenset(_folded(c) for c in alias.columns)
        return known.get(_ref(source))
    if isinstance(source, exp.Table):  # a function in FROM: known only by its column list
        alias = source.args.get("alias")
        columns = alias.columns if isinstance(alias, exp.TableAlias) else []
        return frozenset(_folded(c) for c in columns) or None
    if not isinstance(source, Scope) or depth > 32:
        return None
    own = isinstance(source.expression, exp.Values | exp.Unnest)
    holder = source.expression if own else source.expression.parent
    alias = (
        holder.args.get("alias")
        if isinstance(holder, exp.Subquery | exp.CTE | exp.Values | exp.Unnest)
        else None
    )
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return frozenset(_folded(c) for c in alias.columns)
    if not isinstance(source.expression, exp.Select):
        return None
    names: set[str] = set()
    for select in source.expression.selects:
        if isinstance(select, exp.Alias):
            names.add(_folded(select.args.get("alias")))
            continue
        if isinstance(select, exp.Column) and not select.is_star:
            names.add(_folded(select.this))
            continue
        if isinstance(select, exp.Star):  # every source's columns
            parts = [_columns_of(src, known, depth + 1) for _, src in source.selected_sources.values()]
        elif isinstance(select, exp.Column) and select.table in source.sources:  # t.*
            parts = [_columns_of(source.sources[select.table], known, depth + 1)]
        else:  # a name PostgreSQL makes up (`count`, `?column?`): left open
            return None
        if not parts or any(p is None for p in parts):
            return None
        names.update(n for p in parts if p is not None for n in p)
    return frozenset(names)


def _function_source(source: exp.Expr | Scope) -> tuple[RelationRef, list[str]] | None:
    """The function a FROM item without a column list calls, and its alias (with `ordinality`
    when WITH ORDINALITY adds that column); None for any other FROM item."""
    node = source.expression if isinstance(source, Scope) else source
    if not isinstance(node, exp.Unnest | exp.Lateral | exp.Table):
        return None
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return None
    call = node.this if isinstance(node, exp.Lateral) else node
    numbered = any(
        n.args.get(k) for n in (node, call) if isinstance(n, exp.Expr) for k in ("ordinality", "offset")
    )
    name = [_folded(alias.this) if isinstance(alias, exp.TableAlias) else "", *(["ordinality"] * numbered)]
    if isinstance(call, exp.Subquery | exp.Select):
        return None
    if isinstance(call, exp.Unnest):
        return (None, "unnest"), name
    if isinstance(call, exp.Table):
        if isinstance(call.this, exp.Identifier):
            return None
        schema = _folded(call.args.get("db")) or None
        call = call.this
    elif isinstance(call, exp.Dot) and isinstance(call.this, exp.Identifier):
        schema, call = _folded(call.this), call.expression
    else:
        schema = None
    head = call.sql(dialect="postgres").split("(", 1)[0].strip() if isinstance(call, exp.Expr) else ""
    return (schema, head.lower() if head.isidentifier() else ""), name


def _qualified(root: Scope) -> Iterator[tuple[exp.Column, exp.Expr | Scope]]:
    for scope in root.traverse():
        for column in scope.columns:
            if not column.table or isinstance(column.this, exp.Star):
                continue
            found = _source(scope, column.table)
            if found is not None:
                yield column, found[1]


def _check_columns(tree: exp.Expr, catalog: ColumnCatalog) -> None:
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, ValueError):  # a shape scoping cannot read: left to the database
        return
    if root is None:
        return
    pairs = list(_qualified(root))
    if not pairs:
        return
    tables = {
        _ref(t)
        for scope in root.traverse()
        for t in scope.sources.values()
        if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier)
    }
    known = catalog.relation_columns(tables) if tables else {}
    for column, source in pairs:
        function = _function_source(source)
        if function is not None:  # rt24 F3: no column list; unknown columns refuse
            ref, (alias, *numbered) = function
            found, plain = (
                catalog.function_columns(ref) if isinstance(catalog, FunctionColumns) else (set(), False)
            )
            if _folded(column.this) not in {*found, *numbered, *([alias] if plain else [])}:
                refuse("attribute_call", _MESSAGE)
            continue
        columns = _columns_of(source, known)
        if columns is not None and _folded(column.this) not in columns:
            refuse("attribute_call", _MESSAGE)
