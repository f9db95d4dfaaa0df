"""Pass: a query whose CTEs expand past a bound is refused before the engine compiles it.

SQLite and MariaDB compile a CTE's body once per reference (SQLite in `sqlite3_prepare`, where no
progress handler or interrupt runs; PostgreSQL too when it is NOT MATERIALIZED), so a chain of
CTEs that each read the previous one twice doubles per level: twenty short lines made SQLite
compile 2^19 SELECTs, answering a 2 s call at 6-8 s and burning ~100 s of CPU and 600 MB after
the call gave up (red team rt15my F5). The same holds for an expression: MariaDB, PostgreSQL and
SQLite merge a CTE or derived table into the query that reads it, so a column read twice per level
(`SELECT x + x AS x FROM c3`, or a size guard that reads its operand three times) is evaluated as
a tree, 2^levels times, while the statement is optimised, where no KILL or timeout reaches it
(red team rt16 F1, F3: 25 short SELECTs ran minutes past a 2 s call). So a query is also refused
when its expressions, with each column of a CTE or derived table replaced by the expression it
stands for, exceed `MAX_EXPANDED_NODES`, each operand the engine itself copies counted per copy:
PostgreSQL's parser turns `a BETWEEN SYMMETRIC b AND c` into four copies of `a`, and `a IN (...)`
into one per item that reads a column, so eleven nested levels (700 bytes) took a backend to
10.8 GB, deaf to the timeout and the cancel (red team pg17 F6; weights per engine:
`function_tables.tables.EXPRESSION_COPIES`). Nothing an analyst writes comes near either bound.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Final, Protocol, runtime_checkable

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.scope import Scope, ScopeType, build_scope

from mcpkit.sql.admission.function_tables.tables import EXPRESSION_COPIES, MERGE_WORK
from mcpkit.sql.admission.merge_work import merge_work
from mcpkit.sql.errors import refuse

__all__ = [
    "MAX_EXPANDED_NODES",
    "MAX_EXPANDED_SELECTS",
    "RelationRef",
    "ViewCatalog",
    "limit_expansion",
    "output_nodes",
]

MAX_EXPANDED_SELECTS: Final = 1024
"""SELECTs a query may hold once every CTE reference is replaced by the CTE's body."""
MAX_EXPANDED_NODES: Final = 100_000
"""Syntax nodes one SELECT's expressions may hold once every column of a CTE or derived table it
reads is replaced by that column's expression (transitively)."""


RelationRef = tuple[str | None, str]
"""(schema or None, name) of a relation as written, case-folded."""


@runtime_checkable
class ViewCatalog(Protocol):
    """The database's views, whose bodies the engine merges into the query that reads them."""

    def view_nodes(self, refs: Collection[RelationRef]) -> Mapping[RelationRef, int]:
        """The expanded size of the largest column of each ref that is a view (`output_nodes`)."""
        ...


_Copies = Callable[[exp.Expr], Mapping[str, int]]


class _Columns:
    """The size of a scope's expressions with each column of a CTE, derived table or LATERAL
    subquery they read replaced by the expression it stands for (memoised per scope and column).

    A column the scope's own FROM does not name resolves in the enclosing scopes, as the engine
    resolves it: a LATERAL or correlated subquery reads its siblings' columns, and PostgreSQL pulls
    a FROM-less LATERAL subquery up and substitutes its expressions (red team pg15 F2: 25
    `LATERAL (SELECT a.x + a.x AS x)` built a 2^25 tree, 3.5 GB). A subquery inside an expression
    counts there too, since merging copies it along."""

    def __init__(self, root: Scope | None, views: Mapping[RelationRef, int], copies: _Copies) -> None:
        self.sizes: dict[tuple[int, str], int] = {}
        self.copies = copies  # the engine's own copies of an operand (PostgreSQL's BETWEEN, IN)
        # without scopes (a shape scoping cannot read), every node counts once where it is written
        self.scopes = {id(s.expression): s for s in root.traverse()} if root is not None else None
        self.views = views  # a view's column stands for its largest expression, as PostgreSQL merges it

    def size(self, scope: Scope | None, node: exp.Expr) -> int:
        total = 0
        stack: list[tuple[exp.Expr, int]] = [(node, 1)]  # each node with how many copies the engine makes
        while stack and total <= MAX_EXPANDED_NODES:
            each, weight = stack.pop()
            if isinstance(each, _NESTED) and each is not node and self.scopes is not None:
                total += weight * self._nested(each)
                continue
            column = self._column(scope, each) if isinstance(each, exp.Column) and scope is not None else 1
            total += weight * column
            copied = self.copies(each)
            stack.extend(
                (child, weight * copied.get(child.arg_key or "", 1)) for child in each.iter_expressions()
            )
        return total

    def _nested(self, node: exp.Expr) -> int:
        """A subquery inside an expression (not a source of the FROM): its whole size."""
        inner = node.this if isinstance(node, exp.Subquery) else node
        scope = self.scopes.get(id(inner)) if self.scopes is not None else None
        if scope is None or scope.scope_type not in (ScopeType.SUBQUERY, ScopeType.SET_OPERATION):
            return 0
        return self._memo((id(inner), ""), lambda: self.size(scope, inner))

    def _column(self, scope: Scope, column: exp.Column) -> int:
        name = column.name.casefold()
        sources: list[exp.Table | Scope] = []
        current: Scope | None = scope
        enclosing: set[int] = set()  # a source that holds the reference is not what it reads
        hidden = False  # a derived table or CTE does not see its siblings in the FROM that holds it
        while current is not None and not sources:
            enclosing.add(id(current.expression))
            named = {} if hidden else current.selected_sources
            if column.table:
                sources = [named[column.table][1]] if column.table in named else []
            else:  # the nearest level with a source that may have the column, as the engine resolves it
                sources = [
                    s
                    for _, s in named.values()
                    if isinstance(s, exp.Table) or _producers(s, name, _renamed(s))
                ]
            sources = [s for s in sources if not (isinstance(s, Scope) and id(s.expression) in enclosing)]
            hidden = current.scope_type in (ScopeType.DERIVED_TABLE, ScopeType.CTE)
            current = current.parent
        views = [self.views.get(_ref(s), 1) for s in sources if isinstance(s, exp.Table)]
        return max([1, *views, *(self._output(s, name) for s in sources if isinstance(s, Scope))])

    def _output(self, scope: Scope, name: str) -> int:
        folded = name.casefold()
        return self._memo(
            (id(scope.expression), folded),
            lambda: max([1, *(self.size(s, e) for s, e in _producers(scope, folded, _renamed(scope)))]),
        )

    def _memo(self, key: tuple[int, str], compute: Callable[[], int]) -> int:
        if key not in self.sizes:
            self.sizes[key] = 1  # while it is computed: a recursive CTE reads itself
            self.sizes[key] = compute()
        return self.sizes[key]


_NESTED: Final = (exp.Query, exp.Subquery, exp.Lateral)


def _no_copies(node: exp.Expr) -> Mapping[str, int]:
    return {}


def _producers(scope: Scope, name: str, renamed: list[str]) -> list[tuple[Scope, exp.Expr]]:
    """The expressions (with the scope they are read in) that output column `name` of `scope`;
    `renamed` is the column list an alias gives the source (`AS d(x, y)`), matched by position."""
    node = scope.expression
    if isinstance(node, exp.SetOperation):
        names = renamed or [p.alias_or_name.casefold() for p in node.selects]
        return [pair for branch in scope.set_operation_scopes for pair in _producers(branch, name, names)]
    if not isinstance(node, exp.Select):  # LATERAL (SELECT ...) AS a: the subquery's outputs
        return [pair for inner in scope.subquery_scopes for pair in _producers(inner, name, renamed)]
    selects = node.selects
    stars = [p for p in selects if isinstance(p, exp.Star) or isinstance(p.this, exp.Star)]
    if renamed and name in renamed:
        at = renamed.index(name)
        if not stars:
            return [(scope, selects[at].unalias())] if at < len(selects) else []
        return [(scope, p.unalias()) for p in selects if p not in stars]  # `d(x)` over `*`: any output
    found = [(scope, p.unalias()) for p in selects if p.alias_or_name.casefold() == name]
    # `SELECT *` (or `t.*`) passes its own sources' column through
    found += [(scope, exp.column(name, table=p.table if isinstance(p, exp.Column) else None)) for p in stars]
    return found


def _renamed(scope: Scope) -> list[str]:
    """The column names an alias list gives a derived table, CTE or LATERAL subquery, if any."""
    node = scope.expression
    holder = node if isinstance(node, exp.Lateral) else node.parent
    alias = holder.args.get("alias") if isinstance(holder, exp.Subquery | exp.CTE | exp.Lateral) else None
    return [c.name.casefold() for c in alias.columns] if isinstance(alias, exp.TableAlias) else []


def _ref(table: exp.Table) -> RelationRef:
    return (table.db.casefold() or None, table.name.casefold())


_ALIKE: Final = "This query reads two sources of the same name in one FROM; give each its own alias."


def _distinct_sources(tree: exp.Expr) -> exp.Expr:
    """A copy of `tree` whose sources of one block each have their own name: SQLite reads
    `json_each('[1]'), json_each('[2]')` or `t, t` unaliased, which scoping refuses ("Alias already
    used"; red team rtI L1 answered INTERNAL); their columns are counted the same."""
    copied = tree.copy()
    for number, select in enumerate(copied.find_all(exp.Select)):
        sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
        seen: set[str] = set()
        for source in (s.this for s in sources if s is not None):
            name = source.alias_or_name.casefold()
            if name in seen:
                source.set("alias", exp.TableAlias(this=exp.to_identifier(f"_source_{number}_{len(seen)}")))
            seen.add(name)
    return copied


def _sources(root: Scope) -> set[RelationRef]:
    return {
        _ref(t) for s in root.traverse() for _, t in s.selected_sources.values() if isinstance(t, exp.Table)
    }


def _scoped(tree: exp.Expr, catalog: ViewCatalog | None, dialect: str) -> tuple[Scope | None, _Columns]:
    copies = EXPRESSION_COPIES.get(dialect, _no_copies)
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, ValueError):  # a shape scoping cannot read: counted as written
        root = None
    if root is None:
        return None, _Columns(None, {}, copies)
    try:
        tables = _sources(root)
    except OptimizeError:  # two sources of one name: counted over a copy that names them apart
        root = build_scope(_distinct_sources(tree))
        try:
            tables = _sources(root) if root is not None else set()
        except OptimizeError:
            refuse("too_complex", _ALIKE)
    views = catalog.view_nodes(tables) if catalog is not None and tables else {}
    return root, _Columns(root, views, copies)


def _expanded_nodes(tree: exp.Expr, dialect: str, catalog: ViewCatalog | None = None) -> int:
    root, columns = _scoped(tree, catalog, dialect)
    if root is None:
        return columns.size(None, tree)
    return max((columns.size(scope, scope.expression) for scope in root.traverse()), default=0)


def output_nodes(sql: str, dialect: str, catalog: ViewCatalog | None) -> int:
    """The syntax nodes of the largest output column of `sql` (a view's body), each column of a CTE,
    derived table or view it reads replaced by the expression it stands for; 1 when unreadable."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return 1
    root, columns = _scoped(tree, catalog, dialect)
    if root is None:
        return max(1, columns.size(None, tree))
    branches = [s for s in root.traverse() if s is root or s.scope_type == ScopeType.SET_OPERATION]
    selects = [(s, p.unalias()) for s in branches for p in getattr(s.expression, "selects", [])]
    return max([1, *(columns.size(s, p) for s, p in selects if isinstance(s.expression, exp.Select))])


class _Expansion:
    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.open: set[int] = set()

    def size(self, body: exp.Expr) -> int:
        """SELECTs in `body` with each CTE it reads counted as its own expansion; the definitions
        of CTEs nested in `body` count where they are read."""
        total = 0
        for node in body.walk(prune=lambda n: isinstance(n, exp.CTE) and n is not body):
            if isinstance(node, exp.CTE) and node is not body:
                continue
            if isinstance(node, exp.Select):
                total += 1
            elif isinstance(node, exp.Table) and not node.args.get("db"):
                cte = _defining(node)
                if cte is not None:
                    total += self._cte(cte)
            if total > MAX_EXPANDED_SELECTS:
                break
        return total

    def _cte(self, cte: exp.CTE) -> int:
        key = id(cte)
        if key in self.open:  # a recursive reference: the engine iterates it, it is not copied
            return 0
        if key not in self.sizes:
            self.open.add(key)
            self.sizes[key] = self.size(cte)
            self.open.discard(key)
        return self.sizes[key]


def _defining(table: exp.Table) -> exp.CTE | None:
    """The CTE a bare table name reads: the nearest enclosing WITH that defines it."""
    name = table.name.casefold()
    node: exp.Expr | None = table.parent
    while node is not None:
        with_ = node.args.get("with_") or node.args.get("with")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if isinstance(cte, exp.CTE) and cte.alias_or_name.casefold() == name:
                    return cte
        node = node.parent
    return None


def limit_expansion(tree: exp.Expr, dialect: str, catalog: object = None) -> exp.Expr:
    """Refuse a query whose CTE references expand to more than `MAX_EXPANDED_SELECTS` SELECTs, or
    whose expressions, merged and copied as the engine does, to more than `MAX_EXPANDED_NODES`, or
    whose chain of merged scopes costs the planner more than the engine's `MERGE_WORK`.

    >>> import sqlglot
    >>> sql = "WITH a AS (SELECT 1 AS x), b AS (SELECT p.x FROM a p, a q) SELECT * FROM b, b AS c"
    >>> limit_expansion(sqlglot.parse_one(sql), "sqlite").sql()[:20]
    'WITH a AS (SELECT 1 '

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect (every engine: the bound is far above real queries).
        catalog: The database's catalog; with `relation_columns` (PostgreSQL's), a `*` over a table
            counts its columns in the merge work; when it is a `ViewCatalog`, a view's column counts
            as its largest expression (PostgreSQL merges the view's body into the query).

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `too_complex`.
    """
    views = catalog if isinstance(catalog, ViewCatalog) else None
    if _expanded_nodes(tree, dialect, views) > MAX_EXPANDED_NODES:
        refuse(
            "too_complex",
            "The query's expressions grow past what can be evaluated safely once each CTE or derived"
            " table column is replaced by the expression it stands for and each operand the database"
            " copies (BETWEEN, IN) is counted per copy (a column read twice per level doubles per"
            " level); compute it in fewer steps, or split the query.",
        )
    work = MERGE_WORK.get(dialect)
    if work is not None and merge_work(tree, catalog) > work:  # the planner's pull-up (rt33a F4)
        refuse(
            "too_complex",
            "The query nests too many wide CTEs or derived tables reading each other (merging each level"
            " into the next costs the database's planner width x depth^2 before any timeout applies);"
            " select only the columns needed, or split the query.",
        )
    if any(True for _ in tree.find_all(exp.CTE)) and _Expansion().size(tree) > MAX_EXPANDED_SELECTS:
        refuse(
            "too_complex",
            f"The query's CTEs expand to more than {MAX_EXPANDED_SELECTS} SELECTs (the database copies a"
            " CTE's body for each place that reads it, so CTEs reading CTEs twice double per level);"
            " read each CTE once, or split the query.",
        )
    return tree
