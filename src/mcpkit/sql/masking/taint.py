"""Taint analysis over sqlglot scopes: which outputs derive from a masked column, and which uses leak.

Runs on a *qualified* tree (every column names its source). Scopes are visited bottom-up; each
output of each scope gets an `Out`:

    tainted   its value derives from a masked column (upper(email), a CTE passing it on, ...)
    live      it carries the real masked value (only through `*`, which cannot be rewritten)

A tainted reference is allowed only in a projection (the output is then masked); anywhere else
(WHERE, ON, GROUP BY, ORDER BY, HAVING, DISTINCT, window PARTITION/ORDER, FROM functions, set
operations that compare rows) it decides which rows come back, so the query is refused. Column
references carrying live values are collected for rewriting to a typed NULL, so the database
never computes on a masked value (no error or timing side channels).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Final, NoReturn

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from mcpkit.errors import Refused
from mcpkit.sql.masking.policy import MaskPolicy
from mcpkit.sql.masking.schema import KnownSchema

__all__ = ["PROJ", "REF", "UNRESOLVED", "MaskRefused", "Out", "Taint", "refuse_mask"]

log = logging.getLogger("mcpkit.sql")

REF: Final = "mcpkit_ref"  # meta key: index of a column node in the tree the rewrite edits
PROJ: Final = "mcpkit_proj"  # meta key: the name a projection shows (or "" when not certain)
_MAX_PASSES: Final = 8  # recursive CTEs: taint grows monotonically, so this converges fast
_WINDOW_SPEC: Final = frozenset({"partition_by", "order", "spec"})
_USE: Final = (
    "Masked columns may only be selected: this query filters, joins, groups, orders, deduplicates "
    "or compares on one, which would reveal it."
)
_WITHHELD: Final = (
    "This query reads a full-text index or another virtual table built over masked columns, which "
    "this server withholds; query the base table instead (its masked columns come back as <masked>)."
)
UNRESOLVED: Final = (
    "This query names a table this server cannot resolve while columns are masked (a catalog, a "
    "schema it does not read, or a name no schema on its path has); name a readable table, qualified."
)
_UNCHECKED: Final = (
    "This query reads a table or uses a construct this server cannot check for masked columns; "
    "select plain columns of the listed tables."
)


class MaskRefused(Refused):
    """A query that would reveal a masked value, or that masking cannot check (fail closed).

    The message is one model-safe sentence; `detail` is for the operator's log and audit only.
    """

    expose_data = True  # the stable reason only

    def __init__(
        self, detail: str, *, unchecked: bool = False, withheld: bool = False, message: str | None = None
    ) -> None:
        message = message or (_WITHHELD if withheld else _UNCHECKED if unchecked else _USE)
        super().__init__(message, data={"reason": "masked_column"})
        self.detail = detail


MaskRefused.__module__ = "mcpkit.sql.masking"


def refuse_mask(
    detail: str, *, unchecked: bool = False, withheld: bool = False, message: str | None = None
) -> NoReturn:
    """Raise `MaskRefused`; `detail` never reaches the model, `message` (a fixed sentence) does."""
    log.info("masking refused a query: %s", detail)
    raise MaskRefused(detail, unchecked=unchecked, withheld=withheld, message=message)


@dataclass(frozen=True)
class Out:
    """One output column of a scope."""

    name: str
    tainted: bool = False
    live: bool = False
    type: str | None = None
    shown: str | None = None  # the name the database reports, when certain

    def merge(self, other: Out) -> Out:
        """Positional union of two branches (UNION ALL): tainted or live if either is."""
        return replace(
            self,
            tainted=self.tainted or other.tainted,
            live=self.live or other.live,
            type=self.type or other.type,
        )


class Taint:
    """Analyse one qualified tree.

    Args:
        tree: The qualified tree.
        schema: The reflected schema.
        policy: The mask policy.
    """

    def __init__(self, tree: exp.Expr, schema: KnownSchema, policy: MaskPolicy) -> None:
        self.schema = schema
        self.policy = policy
        self.scopes = traverse_scope(tree)
        if not self.scopes:
            refuse_mask("no scope", unchecked=True)
        self.by_expr = {id(s.expression): s for s in self.scopes}
        self.outs: dict[int, tuple[Out, ...]] = {}
        self.rewrites: dict[int, str | None] = {}  # REF index -> type of the masked value
        self.star_values: list[tuple[exp.Expr, str | None]] = []  # `*` columns carrying one, with type

    def run(self) -> tuple[Out, ...]:
        """Outputs of the root scope; raises `Refused` on a leaking use."""
        for _ in range(_MAX_PASSES):
            before = dict(self.outs)
            for scope in self.scopes:
                self.outs[id(scope)] = self._scope(scope)
            if self.outs == before:
                return self.outs[id(self.scopes[-1])]
        refuse_mask("recursion did not settle", unchecked=True)

    # --- sources -------------------------------------------------------------------------------

    def _source(self, scope: Scope, name: str) -> exp.Expr | Scope | None:
        s: Scope | None = scope
        while s is not None:
            if name in s.sources:
                found: exp.Expr | Scope = s.sources[name]
                return found
            s = s.parent
        return None

    def _outputs(self, source: Scope) -> tuple[Out, ...]:
        if id(source) in self.outs:
            return self.outs[id(source)]
        # A recursive CTE's reference to itself: sqlglot hands its anchor branch; the values
        # are the whole union's, so take the union from the previous pass (taint only grows).
        anchor = self.by_expr.get(id(source.expression))
        union = self.by_expr.get(id(source.expression.parent))
        if anchor is None:
            refuse_mask("unresolved derived source", unchecked=True)
        outs = self.outs.get(id(anchor), ())
        prior = self.outs.get(id(union), ()) if union is not None else ()
        if prior and len(prior) == len(outs):
            outs = tuple(a.merge(b) for a, b in zip(outs, prior, strict=True))
        return outs

    def _table_columns(self, table: exp.Table) -> dict[str, str]:
        cols = self.schema.columns(table)
        if cols is None:
            refuse_mask(f"unknown table {table.name}", unchecked=True)
        return cols

    def _visible_columns(self, table: exp.Table) -> dict[str, tuple[str, str]]:
        """A base table's columns as the query sees them: visible name -> (real name, type).

        A column list on the alias renames by position (`customers AS c(id, nm, name)`: `c.name`
        is the third column, the real email); a list longer than the table cannot be resolved.
        """
        cols = self._table_columns(table)
        alias = table.args.get("alias")
        renamed = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if not renamed:
            return {c: (c, t) for c, t in cols.items()}
        if len(renamed) > len(cols):
            refuse_mask(f"column list of {table.name} is longer than its columns", unchecked=True)
        real = list(cols.items())
        visible = [*renamed, *(c for c, _ in real[len(renamed) :])]
        if len({n.casefold() for n in visible}) != len(visible):
            refuse_mask(f"column list of {table.name} repeats a name", unchecked=True)
        return dict(zip(visible, real, strict=True))

    def _source_tainted(self, source: exp.Expr | Scope | None) -> bool:
        if source is None:
            return True
        if isinstance(source, Scope):
            return any(o.tainted for o in self._outputs(source))
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            cols = self._table_columns(source)
            return bool(self.policy.masked_columns(self.schema.schema_of(source), source.name, cols))
        return False

    def _column(self, scope: Scope, col: exp.Column) -> Out:
        source = self._source(scope, col.table)
        name = col.name
        if isinstance(source, Scope):
            found = [o for o in self._outputs(source) if o.name == name]
            if not found:
                refuse_mask(f"column {name} not in derived source", unchecked=True)
            out = found[0]
            for other in found[1:]:
                out = out.merge(other)
            return out
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            visible = self._visible_columns(source)
            if name not in visible:
                refuse_mask(f"unknown column {name}", unchecked=True)
            real, type_text = visible[name]
            if self.policy.masks(self.schema.schema_of(source), source.name, real):
                return Out(name, tainted=True, live=True, type=type_text, shown=name)
            return Out(name, shown=name)
        if source is None:
            refuse_mask(f"unresolved source {col.table}", unchecked=True)
        return Out(name)  # a table function or VALUES: its arguments are checked where they stand

    # --- one scope -----------------------------------------------------------------------------

    def _scope(self, scope: Scope) -> tuple[Out, ...]:
        expr = scope.expression
        projections: dict[int, list[tuple[exp.Expr, Out]]] = {}
        aliases: list[exp.Column] = []
        for node in scope.walk():
            if node is expr:
                continue
            ref = self._reference(scope, node, aliases)
            if ref is None or not ref.tainted:
                continue
            index = _projection_index(node, expr)
            if index is None:
                refuse_mask(f"masked value used outside the select list ({node.sql()[:80]})")
            projections.setdefault(index, []).append((node, ref))
        outs = self._build_outputs(scope, projections)
        for col in aliases:  # ORDER BY / GROUP BY / HAVING name: an output of this scope
            hits = [o for o in outs if o.name == col.name]
            if not _bare(col):
                # Inside an expression the engines read an input column of that name first:
                # `SELECT region AS email ... ORDER BY upper(email)` orders by the real email.
                hits += self._inputs(scope, col.name)
            if not hits:
                refuse_mask(f"unresolved column {col.name}", unchecked=True)
            if any(o.tainted for o in hits):
                refuse_mask("masked output used to order, group or filter")
        return outs

    def _reference(self, scope: Scope, node: exp.Expr, aliases: list[exp.Column]) -> Out | None:
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                source = self._source(scope, node.table) if node.table else None
                sources: Iterable[exp.Expr | Scope | None] = (
                    [source] if node.table else scope.sources.values()
                )
                if any(self._source_tainted(s) for s in sources):
                    refuse_mask("whole-row reference to a table with masked columns")
                return None
            if not node.table:
                aliases.append(node)
                return None
            return self._column(scope, node)
        if isinstance(node, exp.TableColumn):
            if self._source_tainted(self._source(scope, node.name)):
                refuse_mask("whole-row reference to a table with masked columns")
            return None
        if isinstance(node, exp.Star) and isinstance(node.parent, exp.Select):
            if any(self._source_tainted(s) for s in scope.sources.values()):
                refuse_mask("unexpanded star over masked columns", unchecked=True)
            return None
        if isinstance(node, exp.UNWRAPPED_QUERIES) and _is_value_subquery(node):
            child = self.by_expr.get(id(node))
            if child is None or child.scope_type != ScopeType.SUBQUERY:
                refuse_mask("unresolved subquery", unchecked=True)
            outs = self._outputs(child)
            if isinstance(node.parent, exp.Exists) or not any(o.tainted for o in outs):
                return None  # EXISTS ignores what its subquery selects
            merged = outs[0]
            for o in outs[1:]:
                merged = merged.merge(o)
            return merged
        return None

    def _inputs(self, scope: Scope, name: str) -> list[Out]:
        """Columns called `name`, in any case, of the FROM sources seen from `scope` and enclosing scopes."""
        found: list[Out] = []
        s: Scope | None = scope
        while s is not None:
            for _, source in s.selected_sources.values():
                if isinstance(source, Scope):
                    found += [o for o in self._outputs(source) if o.name.casefold() == name.casefold()]
                elif isinstance(source.this, exp.Identifier):  # a table function's outputs are clean
                    schema = self.schema.schema_of(source)
                    found += [
                        Out(c, tainted=self.policy.masks(schema, source.name, real))
                        for c, (real, _) in self._visible_columns(source).items()
                        if c.casefold() == name.casefold()
                    ]
            s = s.parent
        return found

    def _build_outputs(
        self, scope: Scope, projections: dict[int, list[tuple[exp.Expr, Out]]]
    ) -> tuple[Out, ...]:
        expr = scope.expression
        if isinstance(expr, exp.Select):
            outs = tuple(
                self._projection(scope, p, projections.get(i, [])) for i, p in enumerate(expr.selects)
            )
            distinct = expr.args.get("distinct")
            if distinct and not distinct.args.get("on") and any(o.tainted for o in outs):
                refuse_mask("DISTINCT over a masked value")
            return outs
        if isinstance(expr, exp.SetOperation):
            left, right = (self._outputs(s) for s in scope.set_operation_scopes)
            if len(left) != len(right):
                refuse_mask("set operation branches differ in width", unchecked=True)
            outs = tuple(a.merge(b) for a, b in zip(left, right, strict=True))
            distinct = not isinstance(expr, exp.Union) or expr.args.get("distinct")
            if distinct and any(o.tainted for o in outs):
                refuse_mask("UNION, INTERSECT or EXCEPT compares masked values")
            return outs
        if isinstance(expr, exp.Values):
            return tuple(Out(n) for n in expr.named_selects)
        children = [s for s in scope.sources.values() if isinstance(s, Scope) and s.parent is scope]
        if not children and isinstance(expr, exp.UDTF):
            return tuple(Out(n) for n in expr.named_selects)  # its arguments were checked above
        if len(children) != 1:
            refuse_mask(f"cannot read the outputs of {type(expr).__name__}", unchecked=True)
        outs = self._outputs(children[0])
        renamed = expr.alias_column_names if isinstance(expr, exp.Lateral) else []
        if renamed:
            if len(renamed) != len(outs):
                refuse_mask("lateral column list differs in width", unchecked=True)
            outs = tuple(replace(o, name=n, shown=None) for o, n in zip(outs, renamed, strict=True))
        return outs

    def _projection(self, scope: Scope, projection: exp.Expr, refs: list[tuple[exp.Expr, Out]]) -> Out:
        name = projection.alias_or_name
        shown = _shown_name(projection, lambda col: self._column(scope, col).shown)
        if not refs:
            return Out(name, shown=shown)
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        while isinstance(inner, exp.Subquery):
            inner = inner.this
        bare = len(refs) == 1 and refs[0][0] is inner
        live = False
        for node, ref in refs:
            if not ref.live:
                continue
            marker = node.meta.get(REF) if isinstance(node, exp.Column) else None
            if marker is not None:
                self.rewrites[marker] = ref.type  # the database gets a typed NULL instead
            elif bare:
                live = True  # `*` passing the raw value on; masked on the way out
                self.star_values.append((node, ref.type))
            else:
                refuse_mask("a masked value from * used in an expression")
        return Out(name, tainted=True, live=live, type=refs[0][1].type, shown=shown)


def _shown_name(projection: exp.Expr, column_shown: Callable[[exp.Column], str | None]) -> str | None:
    marked = projection.meta.get(PROJ)
    if marked is None and isinstance(projection, exp.Alias):
        marked = projection.this.meta.get(PROJ)
    if marked is not None:
        return str(marked) or None
    # Added by star expansion: `src.col AS col`; the database shows the source's name.
    inner = projection.this if isinstance(projection, exp.Alias) else projection
    return column_shown(inner) if isinstance(inner, exp.Column) else None


def _bare(col: exp.Column) -> bool:
    """An ORDER BY or DISTINCT ON item that is the name alone (parenthesised or not): an output alias."""
    node: exp.Expr = col
    while isinstance(node.parent, exp.Paren):
        node = node.parent
    parent = node.parent
    return isinstance(parent, exp.Ordered) or (
        isinstance(parent, exp.Tuple) and isinstance(parent.parent, exp.Distinct)
    )


def _is_value_subquery(node: exp.Expr) -> bool:
    """A query used as a value (scalar, IN, EXISTS, ANY), not a FROM source, CTE or set-op branch."""
    parent = node.parent
    while isinstance(parent, exp.Subquery):
        parent = parent.parent
    if parent is None:
        return False
    return not isinstance(parent, exp.From | exp.Join | exp.Lateral | exp.UDTF | exp.CTE | exp.SetOperation)


def _projection_index(node: exp.Expr, scope_expr: exp.Expr) -> int | None:
    """The select-list position `node` sits in, or None (WHERE, ON, window PARTITION/ORDER, ...)."""
    child, parent = node, node.parent
    while parent is not None and parent is not scope_expr:
        if isinstance(parent, exp.Window) and child.arg_key in _WINDOW_SPEC:
            return None
        child, parent = parent, parent.parent
    if parent is None or not isinstance(scope_expr, exp.Select) or child.arg_key != "expressions":
        return None
    return child.index
