"""Pass: a query whose target lists, stars expanded, hold too many entries is refused before planning.

PostgreSQL's planner pulls each CTE and derived table up into the query that reads it and copies
range-table entries and target lists per level, without checking for interrupts: 148 chained CTEs
`tK AS (SELECT * FROM tK-1)` over a 600-column first one (11 KB of text, under every size limit)
kept a backend busy 21.5 s past a 1 s statement_timeout, 42 s with 1,000 columns, and through the
server the call answered TIMEOUT while the backend ran on (red team rt33a F4). The text hides the
work: a `*` stands for every column of what it reads. So the entries of every SELECT's target list
are counted with each `*` (or `t.*`) as the width of what it expands to: a CTE's or derived table's
own width, a relation's column count from the catalog when it is a `ColumnCatalog` (PostgreSQL),
`UNKNOWN_WIDTH` otherwise (fail closed: MariaDB's catalog is not asked). Refused past
`MAX_TARGET_ENTRIES`; the figures behind it are in docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, build_scope

from mcpkit.sql.admission.limit_expansion import RelationRef
from mcpkit.sql.admission.reject_attribute_calls import ColumnCatalog
from mcpkit.sql.errors import refuse

__all__ = ["MAX_TARGET_ENTRIES", "UNKNOWN_WIDTH", "limit_targets", "target_entries"]

MAX_TARGET_ENTRIES: Final = 10_000
"""Target-list entries (stars expanded) summed over every SELECT: 16 levels of `SELECT *` over a
600-column table pass; at this bound PostgreSQL plans any chain in about 3 s (150 levels, ~67
columns), close to what 150 one-column levels cost alone."""
UNKNOWN_WIDTH: Final = 100
"""The width a `*` over a relation of unknown width counts as."""


class _Widths:
    def __init__(self, known: Mapping[RelationRef, frozenset[str] | None]) -> None:
        self.known = known
        self.memo: dict[int, int] = {}

    def of(self, scope: Scope) -> int:
        """The number of columns `scope` outputs, each `*` expanded."""
        key = id(scope.expression)
        if key not in self.memo:
            self.memo[key] = UNKNOWN_WIDTH  # while it is computed: a recursive CTE reads itself
            self.memo[key] = self._compute(scope)
        return self.memo[key]

    def _compute(self, scope: Scope) -> int:
        node = scope.expression
        if isinstance(node, exp.SetOperation):
            branches = scope.set_operation_scopes
            return self.of(branches[0]) if branches else UNKNOWN_WIDTH
        if isinstance(node, exp.Values):
            first = node.expressions[0] if node.expressions else None
            return len(first.expressions) if isinstance(first, exp.Tuple) else 1
        if not isinstance(node, exp.Select):
            inner = scope.subquery_scopes or scope.derived_table_scopes
            return self.of(inner[0]) if inner else UNKNOWN_WIDTH
        return sum(self._entry(scope, p) for p in node.selects)

    def _entry(self, scope: Scope, projection: exp.Expr) -> int:
        if isinstance(projection, exp.Star):
            sources = [s for _, s in scope.selected_sources.values()]
            return sum(self._source(s) for s in sources) or UNKNOWN_WIDTH
        if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            found = scope.selected_sources.get(projection.table)
            return self._source(found[1]) if found is not None else UNKNOWN_WIDTH
        return 1

    def _source(self, source: exp.Expr | Scope) -> int:
        if isinstance(source, Scope):
            return self.of(source)
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            columns = self.known.get(_ref(source))
            return len(columns) if columns else UNKNOWN_WIDTH
        return UNKNOWN_WIDTH


def _ref(table: exp.Table) -> RelationRef:
    return (table.db.casefold() or None, table.name.casefold())


def target_entries(tree: exp.Expr, catalog: object = None) -> int:
    """Target-list entries of every SELECT in `tree`, each `*` counted as the width it expands to.

    >>> import sqlglot
    >>> target_entries(sqlglot.parse_one("WITH a AS (SELECT 1 AS x, 2 AS y) SELECT *, 3 FROM a, a AS b"))
    7
    """
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        root = None
    if root is None:  # a shape scoping cannot read: each entry as written, each star unknown
        return sum(
            UNKNOWN_WIDTH if p.find(exp.Star) is p or isinstance(p.this, exp.Star) else 1
            for s in tree.find_all(exp.Select)
            for p in s.selects
        )
    scopes = list(root.traverse())
    known: Mapping[RelationRef, frozenset[str] | None] = {}
    if isinstance(catalog, ColumnCatalog):
        tables = {
            _ref(t)
            for s in scopes
            for _, t in s.selected_sources.values()
            if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier)
        }
        known = catalog.relation_columns(tables) if tables else {}
    widths = _Widths(known)
    return sum(widths.of(s) for s in scopes if isinstance(s.expression, exp.Select))


def limit_targets(tree: exp.Expr, catalog: object = None) -> exp.Expr:
    """Refuse a query whose target lists, stars expanded, hold more than `MAX_TARGET_ENTRIES` entries.

    >>> import sqlglot
    >>> limit_targets(sqlglot.parse_one("SELECT * FROM t")).sql()
    'SELECT * FROM t'

    Args:
        tree: One parsed statement.
        catalog: The database's catalog; when it is a `ColumnCatalog`, a relation's `*` counts as its
            column count, otherwise as `UNKNOWN_WIDTH`.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `too_complex`.
    """
    if target_entries(tree, catalog) > MAX_TARGET_ENTRIES:
        refuse(
            "too_complex",
            "The query selects too many columns in total once each * is expanded, summed over its"
            " CTEs and subqueries; select the columns you need, or split the query.",
        )
    return tree
