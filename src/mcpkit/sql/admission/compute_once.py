"""Pass: a derived table or CTE whose computed output a row would evaluate many times is fenced with
`OFFSET 0`, so that the engine computes it once per row (PostgreSQL, `SearchBounds.holds_operands`).

PostgreSQL pulls a simple subquery up into the query that reads it (a derived table without LIMIT,
OFFSET, grouping, DISTINCT, windows or set-returning calls; a CTE read once and not MATERIALIZED)
and writes each of its outputs back at each place that reads it: `SELECT a || a || a FROM (SELECT
repeat(x, n) AS a ...) s` computes repeat three times per row, and each level that reads the one
below twice doubles it, while the size guards count the value once and no interrupt is seen between
the copies of one row (red team rt19pg F1: ten short levels ran 48 s past the answer). A whole-row
reference (`s`, `s.*`, `(s).*`, `to_jsonb(s)`) reads every output of `s`, and each operand the
parser copies (`ROW(a, b) IN (...)`, BETWEEN) is read once per copy (`EXPRESSION_COPIES`). A
source whose computed output a row would evaluate more than `MAX_READS` times (`MAX_BUILT_READS`
for a builder: repeat, lpad, a subquery, an aggregate that collects) computes those outputs once
per row in a LATERAL one-row subquery fenced with `OFFSET 0` (PostgreSQL's documented fence), and
reads them as columns: the source itself is still pulled up, so a filter on its other columns still
reaches an index (`OFFSET 0` on the whole source turned a 0.45 ms primary-key lookup into a 953 ms
scan). A source without FROM, with `*` or with an output not aliased gets `OFFSET 0` itself. It runs
after `bound_searches`, whose guards read their operand too, and counts those reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, ScopeType, build_scope

from mcpkit.sql.admission.built_values import builds
from mcpkit.sql.admission.function_tables.tables import EXPRESSION_COPIES, SIZE_BOUNDS
from mcpkit.sql.admission.held_operands import SET_RETURNING, call_names, hold_name
from mcpkit.sql.admission.row_copies import MAX_ROW_COPIES, row_copies
from mcpkit.sql.errors import refuse

__all__ = ["MAX_BUILT_READS", "MAX_READS", "compute_once", "refuse_row_copies"]

MAX_READS: Final = 4
"""Evaluations per row of a computed output a pulled-up source may cost before it is fenced."""
MAX_BUILT_READS: Final = 2
"""The same for an output that builds a value (repeat, lpad, array_fill, a subquery, string_agg)."""

_ALL: Final = "*"  # a whole-row reference: every output
_ROW: Final = "mcpkit_row"  # prefix of the LATERAL one-row subquery a source's outputs are computed once in
_COSTLY: Final = (exp.Func, exp.Query, exp.DPipe, exp.Subquery)
_NOT_PULLED: Final = ("group", "having", "distinct", "limit", "offset", "qualify", "windows")

_Copies = Callable[[exp.Expr], Mapping[str, int]]


def _no_copies(node: exp.Expr) -> Mapping[str, int]:
    return {}


def _outputs(scope: Scope) -> list[str]:
    select = scope.expression
    return [p.alias_or_name.casefold() for p in select.selects] if isinstance(select, exp.Select) else []


def _stars(select: exp.Select) -> list[exp.Expr]:
    return [p for p in select.selects if isinstance(p, exp.Star) or isinstance(p.this, exp.Star)]


def _pulled_up(scope: Scope, reads: Mapping[int, int]) -> bool:
    """Whether PostgreSQL may pull `scope` up into the query that reads it."""
    select = scope.expression
    if not isinstance(select, exp.Select) or any(select.args.get(k) for k in _NOT_PULLED):
        return False
    names = {m for p in select.selects for n in p.walk() for m in call_names(n)}
    if any(select.find_all(exp.AggFunc, exp.Window)) or names & SET_RETURNING:
        return False
    if scope.scope_type == ScopeType.CTE:
        cte = select.parent
        if not isinstance(cte, exp.CTE) or cte.args.get("materialized") is not None:
            return False
        with_ = cte.parent
        if isinstance(with_, exp.With) and with_.args.get("recursive"):
            return False
        return reads.get(id(cte), 0) == 1  # read twice, it is computed once and stored
    return scope.scope_type == ScopeType.DERIVED_TABLE


def _cte_reads(root: Scope) -> dict[int, int]:
    """How many FROM entries read each CTE (by the CTE node's id)."""
    counts: Counter[int] = Counter()
    for scope in root.traverse():
        for _, source in scope.selected_sources.values():
            if isinstance(source, Scope) and isinstance(source.expression.parent, exp.CTE):
                counts[id(source.expression.parent)] += 1
    return counts


class _Reads:
    """Per source scope and output name, how many times a row of its readers evaluates it."""

    def __init__(self, copies: _Copies) -> None:
        self.copies = copies
        self.reads: dict[int, Counter[str]] = {}

    def of(self, scope: Scope) -> Counter[str]:
        return self.reads.setdefault(id(scope.expression), Counter())

    def read(self, scope: Scope, column: exp.Column, weight: int) -> None:
        """Count `column`, read `weight` times per row in `scope`, against the source it reads."""
        for source, name in resolve(scope, column):
            self.of(source)[name] += weight

    def walk(self, scope: Scope, node: exp.Expr, weight: int) -> None:
        """Count each column read in `node` (part of `scope`'s SELECT), copies included."""
        stack: list[tuple[exp.Expr, int]] = [(node, weight)]
        while stack:
            each, times = stack.pop()
            if isinstance(each, exp.Query | exp.Subquery) and each is not node:
                self._correlated(scope, each, times)
                continue
            if isinstance(each, exp.Column):
                self.read(scope, each, times)
                continue
            copied = self.copies(each)
            stack.extend((c, times * copied.get(c.arg_key or "", 1)) for c in each.iter_expressions())

    def _correlated(self, scope: Scope, query: exp.Expr, times: int) -> None:
        """A subquery reads each outer column once per evaluation (one parameter per column)."""
        seen: set[tuple[str, str, bool]] = set()
        for column in query.find_all(exp.Column):
            inner = column.find_ancestor(exp.Select)
            local = set()
            while inner is not None and inner is not scope.expression:
                local |= {s.alias_or_name.casefold() for s in _from(inner)}
                inner = inner.parent.find_ancestor(exp.Select) if inner.parent else None
            key = (column.table.casefold(), column.name.casefold(), isinstance(column.this, exp.Star))
            outer = key[0] not in local if key[0] else not local
            if outer and key not in seen:
                seen.add(key)
                self.read(scope, column, times)


def resolve(scope: Scope, column: exp.Column) -> list[tuple[Scope, str]]:
    """The derived tables or CTEs of `scope`'s FROM that `column` reads, each with the output read
    (`*` for the whole row: `s`, `s.*`, `to_jsonb(s)`); none for a stored table's column."""
    sources = {k.casefold(): s for k, (_, s) in scope.selected_sources.items()}
    name = column.name.casefold()
    if column.table:
        source = sources.get(column.table.casefold())
        if not isinstance(source, Scope):
            return []
        return [(source, _ALL if isinstance(column.this, exp.Star) else name)]
    holders = [s for s in sources.values() if isinstance(s, Scope) and (name in _outputs(s) or _starred(s))]
    whole = sources.get(name)
    if not holders and isinstance(whole, Scope):  # `s` alone: the whole row of `s`
        return [(whole, _ALL)]
    return [(source, name) for source in holders]


def _from(select: exp.Select) -> list[exp.Expr]:
    joins = [select.args.get("from_"), *(select.args.get("joins") or [])]
    return [j.this for j in joins if isinstance(j, exp.Expr) and isinstance(j.this, exp.Expr)]


def _starred(scope: Scope) -> bool:
    select = scope.expression
    return isinstance(select, exp.Select) and bool(_stars(select))


def _overread(select: exp.Select, reads: Counter[str], builders: Mapping[str, object]) -> list[exp.Expr]:
    """The computed outputs of `select` read past `MAX_READS` (a builder: `MAX_BUILT_READS`)."""
    whole = reads.get(_ALL, 0)
    found = []
    for item in select.selects:
        value = item.unalias()
        times = reads.get(item.alias_or_name.casefold(), 0) + whole
        if isinstance(value, exp.Star) or times <= MAX_BUILT_READS:
            continue
        if (builds(value, builders) and times > MAX_BUILT_READS) or (
            any(value.find_all(*_COSTLY)) and times > MAX_READS
        ):
            found.append(item)
    return found


def _fence(select: exp.Select, items: list[exp.Expr]) -> list[exp.Expr]:
    """Compute `items` once per row: in a LATERAL one-row subquery the outputs read (the source is
    still pulled up, so a filter on its other columns still reaches an index), or, for a SELECT
    without FROM, with `*`, an output without alias or a call sqlglot does not know (it may be an
    aggregate, which a LATERAL subquery cannot hold), with `OFFSET 0` on the whole source. Returns
    the expressions moved into the LATERAL subquery (each computed once per row)."""
    # a call sqlglot does not know may be an aggregate (jsonb_agg, a user's): not movable
    unknown = any(isinstance(n, exp.Anonymous) for i in items for n in i.walk())
    if (
        not select.args.get("from_")
        or _stars(select)
        or unknown
        or not all(isinstance(i, exp.Alias) for i in items)
    ):
        select.offset(0, copy=False)
        return []
    held = [exp.alias_(item.this.copy(), f"mcpkit_v{n}") for n, item in enumerate(items)]
    name = hold_name(_ROW, held)
    for n, item in enumerate(items):
        item.set("this", exp.column(f"mcpkit_v{n}", name))
    row = exp.Subquery(this=exp.select(*held).offset(0))
    # a comma-joined LATERAL sees every FROM item before it (`a, b CROSS JOIN LATERAL` sees b only)
    select.append(
        "joins", exp.Join(this=exp.Lateral(this=row, alias=exp.TableAlias(this=exp.to_identifier(name))))
    )
    return [h.this for h in held]


def compute_once(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Compute once per row (in a fenced LATERAL subquery, or with `OFFSET 0`) each output of a
    derived table or CTE PostgreSQL would pull up that a row would evaluate past `MAX_READS` times.

    >>> import sqlglot
    >>> sql = "SELECT a || a || a || a || a FROM (SELECT upper(x) AS a FROM t) AS s"
    >>> compute_once(sqlglot.parse_one(sql, read="postgres"), "postgres").sql("postgres")[-84:]
    'FROM t, LATERAL (SELECT UPPER(x) AS mcpkit_v0 OFFSET 0) AS mcpkit_row_03a206bd) AS s'

    Args:
        tree: One admitted query.
        dialect: The target's sqlglot dialect; one whose bounds do not hold operands is left as it is.

    Returns:
        `tree`, fenced where a source would be computed many times per row.

    Raises:
        Refused: `too_complex`, for a row value holding one output past `MAX_ROW_COPIES` times.
    """
    bounds = SIZE_BOUNDS.get(dialect)
    if bounds is None or not bounds.holds_operands:
        return tree
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, ValueError):  # a shape scoping cannot read: limit_expansion's
        return tree
    if root is None:
        return tree
    _refuse_row_copies(root)
    counter = _Reads(EXPRESSION_COPIES.get(dialect, _no_copies))
    ctes = _cte_reads(root)
    for scope in reversed(list(root.traverse())):  # readers before the sources they read
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        reads = counter.of(scope)
        pulled = _pulled_up(scope, ctes)
        over = _overread(select, reads, bounds.growths) if pulled else []
        if over:
            for moved in _fence(select, over):  # read once per row of this source
                counter.walk(scope, moved, 1)
            pulled = False
        for item in select.selects:
            times = reads.get(item.alias_or_name.casefold(), 0) + reads.get(_ALL, 0) if pulled else 1
            if isinstance(item.unalias(), exp.Star) or isinstance(item.unalias().this, exp.Star):
                star = item.unalias()
                for name, count in reads.items() if pulled else [(_ALL, 1)]:
                    column = exp.column(name if name != _ALL else exp.Star(), table=star.args.get("table"))
                    counter.read(scope, column, max(count, 1))
                continue
            counter.walk(scope, item.unalias(), max(times, 1))
        for key, value in select.args.items():
            if key in ("expressions", "with_", "from_", "joins") or not isinstance(value, exp.Expr):
                continue
            counter.walk(scope, value, 1)
        for join in select.args.get("joins") or []:
            if isinstance(join.args.get("on"), exp.Expr):
                counter.walk(scope, join.args["on"], 1)
    return tree


def _refuse_row_copies(root: Scope) -> None:
    if row_copies(root, resolve) > MAX_ROW_COPIES:
        refuse(
            "too_complex",
            f"The query copies a value into a row more than {MAX_ROW_COPIES} times through whole-row"
            " references (rows of rows double per level); select the columns themselves.",
        )


def refuse_row_copies(tree: exp.Expr) -> None:
    """Refuse rows of rows as written, before guards hold their operands in subqueries it cannot follow."""
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        return
    if root is not None:
        _refuse_row_copies(root)
