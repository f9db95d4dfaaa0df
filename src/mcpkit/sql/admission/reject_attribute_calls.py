"""Pass: no PostgreSQL attribute notation that calls a function (`(x).pg_sleep`, `t.nextval`, `o.f`)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Protocol, runtime_checkable

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, build_scope

from mcpkit.sql.admission.attribute_sources import Candidate, candidates, cte_scopes, folded
from mcpkit.sql.admission.function_tables import matches
from mcpkit.sql.admission.limit_expansion import RelationRef
from mcpkit.sql.admission.output_names import item_name, scalar_array, values_names
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


_folded = folded


_Known = Mapping[RelationRef, frozenset[str] | None]


def _ref(table: exp.Table) -> RelationRef:
    return (_folded(table.args.get("db")) or None, _folded(table.this))


# A table's system columns: the catalog lists them, but `*` does not expand them.
_SYSTEM = frozenset({"ctid", "xmin", "cmin", "xmax", "cmax", "tableoid"})
_Entry = str | frozenset[str] | None  # one output column's name (None: not sure), or a `*`'s names


def _columns_of(
    source: exp.Expr | Scope | None,
    known: _Known,
    catalog: object,
    depth: int = 0,
    via: exp.Expr | None = None,
) -> frozenset[str] | None:
    """The column names of a relation, CTE, derived table or function in FROM: only the names
    PostgreSQL surely gives (red team rt25 F1), so a name that is not sure refuses. None only for
    a relation the catalog does not know (the database's error)."""
    if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
        alias = source.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            # `customers x(id, email, nm)` renames the first columns: only the written names are sure
            # (a renamed column's old name is attribute notation again); columns past the list refuse.
            return frozenset(_folded(c) for c in alias.columns)
        return known.get(_ref(source))
    function = _function_names(source, catalog)
    if function is not None:
        return function
    if not isinstance(source, Scope) or depth > 32:  # a function with a column list: those names
        alias = source.args.get("alias") if isinstance(source, exp.Table) else None
        return (
            frozenset(_folded(c) for c in alias.columns) if isinstance(alias, exp.TableAlias) else frozenset()
        )
    names: set[str] = set()
    entries = _named(source, known, catalog, depth)
    alias = via.args.get("alias") if isinstance(via, exp.Table) and via is not source.expression else None
    if isinstance(alias, exp.TableAlias) and alias.columns:  # a CTE read as `c x(a)`
        entries = _renamed(entries, [_folded(c) for c in alias.columns])
    for entry in entries:
        names.update(entry if isinstance(entry, frozenset) else [entry] if entry else [])
    return frozenset(names)


def _named(scope: Scope, known: _Known, catalog: object, depth: int) -> list[_Entry]:
    """A derived table's, CTE's, LATERAL subquery's or VALUES' output columns in order, renamed by
    its alias column list (`q(a)` renames the first column only)."""
    node = scope.expression
    holder = node if isinstance(node, exp.Values | exp.Lateral | exp.Unnest) else node.parent
    entries = _body(scope, known, catalog, depth)
    alias = (
        holder.args.get("alias")
        if isinstance(holder, exp.Subquery | exp.CTE | exp.Values | exp.Lateral | exp.Unnest)
        else None
    )
    if not isinstance(alias, exp.TableAlias) or not alias.columns:
        return entries
    written: list[_Entry] = [_folded(c) for c in alias.columns]
    offset = holder.args.get("offset") if isinstance(holder, exp.Unnest) else None
    if isinstance(offset, exp.Identifier):  # WITH ORDINALITY u(x, n): sqlglot keeps `n` apart
        written.append(_folded(offset))
    return _renamed(entries, written)


def _renamed(entries: list[_Entry], written: list[_Entry]) -> list[_Entry]:
    """An alias column list renames the first columns only."""
    if any(isinstance(e, frozenset) for e in entries[: len(written)]):
        return written  # a `*` among the renamed: which columns keep their name is not sure
    return written + entries[len(written) :]


def _body(scope: Scope, known: _Known, catalog: object, depth: int) -> list[_Entry]:
    node = scope.expression
    if isinstance(node, exp.Lateral):  # LATERAL (SELECT ...) c: the subquery's scope
        inner = node.this.this if isinstance(node.this, exp.Subquery) else None
        found = [s for s in scope.sources.values() if isinstance(s, Scope) and s.expression is inner]
        return _body(found[0], known, catalog, depth + 1) if found and depth < 32 else []
    if isinstance(node, exp.SetOperation):  # UNION/INTERSECT/EXCEPT: the leftmost branch names
        left = scope.set_operation_scopes[:1]
        return _body(left[0], known, catalog, depth + 1) if left and depth < 32 else []
    if isinstance(node, exp.Values):
        return list(values_names(node))
    if not isinstance(node, exp.Select):
        return []
    entries: list[_Entry] = []
    for select in node.selects:
        if isinstance(select, exp.Star):  # every source's columns
            parts = [
                _columns_of(src, known, catalog, depth + 1, via)
                for via, src in scope.selected_sources.values()
            ]
        elif isinstance(select, exp.Column) and select.is_star:  # t.*
            via, src = scope.selected_sources.get(select.table, (None, None))
            parts = [_columns_of(src, known, catalog, depth + 1, via) if src is not None else None]
        else:
            entries.append(item_name(select))
            continue
        entries.append(frozenset(n for p in parts if p is not None for n in p) - _SYSTEM)
    return entries


def _function_names(source: exp.Expr | Scope | None, catalog: object) -> frozenset[str] | None:
    """The columns of a function in FROM without a column list (rt24 F3), None for other items."""
    function = _function_source(source)
    if function is None:
        return None
    ref, (alias, *numbered) = function
    found, plain = catalog.function_columns(ref) if isinstance(catalog, FunctionColumns) else (set(), False)
    node = source.expression if isinstance(source, Scope) else source
    call = node.this if isinstance(node, exp.Lateral) else node
    if isinstance(call, exp.Unnest) and len(call.expressions) == 1 and scalar_array(call.expressions[0]):
        plain = True  # unnest(ARRAY[1, 2]) u: one column, named u
    return frozenset({*found, *numbered, *([alias or ref[1]] if plain else [])})  # no alias: the name


def _function_source(source: exp.Expr | Scope | None) -> tuple[RelationRef, list[str]] | None:
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


def _check_columns(tree: exp.Expr, catalog: ColumnCatalog) -> None:
    columns = [c for c in tree.find_all(exp.Column) if c.table and not isinstance(c.this, exp.Star)]
    if not columns:
        return
    try:
        root = build_scope(tree)
        if root is None:
            raise ValueError("no scope")
        lookup = candidates(tree, root, _function_name)
        ctes = cte_scopes(tree, root)
    except (SqlglotError, KeyError, ValueError):  # a shape scoping cannot read: q's columns unknown
        refuse("attribute_call", _MESSAGE)
    tables = {_ref(t) for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier)}
    known = catalog.relation_columns(tables) if tables else {}
    for column in columns:
        found = lookup(_folded(column.args.get("table")))
        if found is None:
            refuse("attribute_call", _MESSAGE)
        name = _folded(column.this)
        for candidate in found:
            for columns_of in _alternatives(candidate, ctes, known, catalog):
                if columns_of is not None and name not in columns_of:
                    refuse("attribute_call", _MESSAGE)


def _alternatives(
    candidate: Candidate, ctes: Mapping[str, list[Scope | None]], known: _Known, catalog: object
) -> Iterator[frozenset[str] | None]:
    """The columns of each thing a FROM item may read: sqlglot's choice, and for a table name
    every CTE of that name and the relation (a CTE body's own name, a later CTE: rt27 F1)."""
    node, source = candidate.node, candidate.source
    plain = isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier) and not node.args.get("db")
    named = ctes.get(_folded(node.this).lower(), []) if plain else []
    if not named:
        yield _columns_of(source, known, catalog, via=node)
        return
    for scope in named:  # sqlglot's choice is one of them (a recursive CTE's own name: its first branch)
        if scope is None:
            refuse("attribute_call", _MESSAGE)
        yield _columns_of(scope, known, catalog, via=node)
    if isinstance(node, exp.Table) and known.get(_ref(node)) is not None:  # or the relation, if any
        yield _columns_of(node, known, catalog)


def _function_name(node: exp.Expr) -> str | None:
    function = _function_source(node)
    return function[0][1] or None if function else None
