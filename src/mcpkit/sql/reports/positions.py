"""Where a plain parameter may stand: an allowlist, so a value a database might read as a pattern is refused.

A report's parameter must be read by the database as a value, never as a pattern, path or query
language that a caller could fill with wildcards. Naming every pattern reader of three dialects
(regular expressions, SIMILAR TO, GLOB, jsonpath, full-text, `JSON_SEARCH`, `substring(x FROM
pattern)`, user functions, ...) cannot be complete, so this check is fail-closed: each parameter's
value is followed up the tree through nodes known to read it as a value, and it must end in

- a comparison operand (`=`, `<>`, `<`, `<=`, `>`, `>=`, `<=>`, `IS [NOT] DISTINCT FROM`, `IS`),
  an `IN` list or subquery, `BETWEEN`, `EXISTS`;
- a truth value (`WHERE :flag`, `AND`/`OR`/`NOT`, `CASE WHEN :flag`), `LIMIT`/`OFFSET`, `ORDER BY`;
- the subject (not the pattern) of LIKE, ILIKE, GLOB, SIMILAR TO or a regular-expression predicate;
- an output column of the statement itself.

On the way it may pass through parentheses, aliases, casts to scalar types, `COLLATE`, arithmetic,
`||`/`CONCAT`, `COALESCE`, `NULLIF`, `CASE`/`IF` results, `ANY(ARRAY[...])` and a short list of value
functions (case, trimming, length, rounding, dates, literal `replace`/`strpos`, aggregates), whose
result then carries the caller's value on. A number parameter may also be the position or length of
`SUBSTRING`, `LEFT` or `RIGHT`, or an operand of `%`. Anything else (an unknown function, a JSON path,
a cast to an array, `= ANY(:p)`, a `VALUES` row, ...) fails the load.

A value is not followed through a WITH query, a subquery in FROM or a `VALUES` table: a
parameter in such a projection fails the load (`WITH p(q) AS (SELECT :x) ... LIKE p.q` would
otherwise hide the pattern). An output column of the statement can be referred to by its alias
(SQLite in WHERE, MySQL in HAVING), so a column named like such an alias is followed too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlglot import exp

__all__ = ["position_problems"]

_THIS: Final = frozenset({"this"})
_BOTH: Final = frozenset({"this", "expression"})
_REGEX_SUBJECT: Final = tuple(
    cls for name, cls in vars(exp).items() if name.startswith("Regexp") and isinstance(cls, type)
)

# Node -> argument slots where the value is consumed as a value and the flow ends.
_TERMINAL: Final[dict[type[exp.Expr], frozenset[str]]] = {
    **dict.fromkeys((exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE), _BOTH),
    **dict.fromkeys((exp.NullSafeEQ, exp.NullSafeNEQ), _BOTH),
    exp.Is: _BOTH,
    exp.In: frozenset({"this", "expressions", "query"}),
    exp.Between: frozenset({"this", "low", "high"}),
    exp.Exists: _THIS,
    **dict.fromkeys((exp.And, exp.Or, exp.Xor), _BOTH),
    **dict.fromkeys((exp.Not, exp.Where, exp.Having, exp.Qualify, exp.Ordered), _THIS),
    exp.Join: frozenset({"on"}),
    exp.If: _THIS,  # CASE WHEN :flag / IF(:flag, ...): a truth value (or a value compared with CASE's)
    exp.Case: _THIS,  # CASE :x WHEN ...: compared
    exp.Limit: frozenset({"expression"}),
    exp.Offset: frozenset({"expression"}),
    exp.Fetch: frozenset({"count"}),
    **dict.fromkeys((exp.Like, exp.ILike, exp.Glob, exp.SimilarTo, exp.RegexpLike, exp.RegexpILike), _THIS),
}

# Node -> argument slots read as a value; the node's result carries the caller's value on.
_PASS: Final[dict[type[exp.Expr], frozenset[str]]] = {
    **dict.fromkeys((exp.Paren, exp.Alias, exp.Neg, exp.Cast, exp.TryCast, exp.Collate), _THIS),
    **dict.fromkeys((exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.DPipe), _BOTH),
    **{cls: frozenset({"expressions"}) for cls in (exp.Concat, exp.ConcatWs, exp.Array, exp.Tuple)},
    **{cls: frozenset({"this", "expressions"}) for cls in (exp.Coalesce, exp.Greatest, exp.Least)},
    exp.Nullif: _BOTH,
    exp.If: frozenset({"true", "false"}),
    exp.Case: frozenset({"default"}),
    **dict.fromkeys((exp.Any, exp.All, exp.Upper, exp.Lower, exp.Initcap, exp.Length), _THIS),
    **dict.fromkeys((exp.Abs, exp.Ceil, exp.Floor, exp.Round, exp.Sign), _THIS),
    **dict.fromkeys((exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count), _THIS),
    exp.Trim: _BOTH,
    exp.Replace: frozenset({"this", "expression", "replacement"}),  # literal text, not a pattern
    exp.StrPosition: frozenset({"this", "substr"}),
    exp.SplitPart: frozenset({"this", "delimiter"}),
    exp.Substring: _THIS,
    exp.Left: _THIS,
    exp.Right: _THIS,
    exp.Interval: _THIS,
    exp.Extract: frozenset({"expression"}),
    **dict.fromkeys((exp.DateAdd, exp.DateSub, exp.DateDiff), _BOTH),
    **dict.fromkeys((exp.DateTrunc, exp.TimestampTrunc, exp.Date, exp.TsOrDsToDate), _THIS),
    **{cls: _THIS for cls in _REGEX_SUBJECT if cls not in (exp.RegexpLike, exp.RegexpILike)},
}

# Slots that are a number for a number and something else for text: a position or length, and a
# POSIX regular expression in PostgreSQL's `substring(x FROM '.')`; `%`, which is pg_trgm's fuzzy
# match on text. A number parameter only (psycopg sends it typed, so the text reading cannot apply).
_NUMBERS: Final[dict[type[exp.Expr], frozenset[str]]] = {
    exp.Substring: frozenset({"start", "length"}),
    exp.Left: frozenset({"expression"}),
    exp.Right: frozenset({"expression"}),
    exp.Round: frozenset({"decimals"}),
    exp.Mod: _BOTH,
}
_DT = exp.DataType.Type
# A cast passes a value on only to a scalar type: `= ANY(CAST(:p AS text[]))` would make a list of it.
_SCALAR: Final = frozenset(
    {*exp.DataType.TEXT_TYPES, *exp.DataType.NUMERIC_TYPES, *exp.DataType.TEMPORAL_TYPES}
    | {*exp.DataType.BINARY_TYPES, _DT.BOOLEAN, _DT.UUID, _DT.INTERVAL}
)


def _slot(node: exp.Expr) -> str:
    return node.arg_key or ""


def _listed(table: Mapping[type[exp.Expr], frozenset[str]], parent: exp.Expr, slot: str) -> bool:
    slots = table.get(type(parent))
    return slots is not None and slot in slots


def _shown(node: exp.Expr, dialect: str) -> str:
    named = node.copy().transform(
        lambda n: exp.Var(this=f":{n.name}") if isinstance(n, exp.Placeholder) else n
    )
    text = " ".join(named.sql(dialect=dialect, normalize_functions=False).split())
    return text if len(text) <= 60 else text[:57] + "..."


class _Flows:
    """Follows each parameter's value up the tree; collects problems and the aliases it reaches."""

    def __init__(self, tree: exp.Expr, types: Mapping[str, str], dialect: str) -> None:
        self.tree, self.types, self.dialect = tree, types, dialect
        self.problems: list[str] = []
        self.aliases: dict[str, str] = {}  # output column name (casefolded) -> parameter

    def follow(self, start: exp.Expr, name: str, via: str = "") -> None:
        who = f"parameter {name!r}" + (f" (through the output column {via!r})" if via else "")
        node = start
        while True:
            parent, slot = node.parent, _slot(node)
            if parent is None:
                return
            if isinstance(parent, exp.Select) and slot == "expressions":
                nxt = self._projection(parent, node, name, who)
                if nxt is None:
                    return
                node = nxt
                continue
            if isinstance(parent, exp.Values):
                self.problems.append(self._derived(who, name))
                return
            if _listed(_TERMINAL, parent, slot):
                return
            if _listed(_PASS, parent, slot) and self._passes(parent, node):
                node = parent
                continue
            if (
                _listed(_NUMBERS, parent, slot)
                and isinstance(node, exp.Placeholder)
                and self.types.get(node.name) in ("integer", "number")
            ):
                node = parent
                continue
            self.problems.append(
                f"{who} is used in `{_shown(parent, self.dialect)}`, where mcpkit cannot tell that the "
                "database reads it as a plain value (not a pattern, path or query); compare it with =, <, "
                "IN or BETWEEN, or use a like: parameter as the whole pattern of LIKE"
            )
            return

    @staticmethod
    def _passes(parent: exp.Expr, node: exp.Expr) -> bool:
        """A cast to a scalar type; ANY/ALL over an ARRAY[...] (a bare text would be read as an array)."""
        if isinstance(parent, exp.Cast | exp.TryCast):
            return isinstance(parent.to, exp.DataType) and parent.to.this in _SCALAR
        if isinstance(parent, exp.Any | exp.All):
            inner = node.this if isinstance(node, exp.Paren) else node
            return isinstance(inner, exp.Array)
        return True

    def _projection(self, select: exp.Expr, item: exp.Expr, name: str, who: str) -> exp.Expr | None:
        """Where a value in a SELECT list goes: the caller (top), on from a scalar subquery, or refused."""
        query: exp.Expr = select
        while isinstance(query.parent, exp.SetOperation) or (
            isinstance(query.parent, exp.Subquery)
            and not query.parent.args.get("alias")
            and isinstance(query.parent.parent, exp.SetOperation | None)
        ):
            query = query.parent
        outer = query.parent
        if outer is None:
            self._output(item, name)
            return None
        if isinstance(outer, exp.Exists):
            return None
        if (
            isinstance(outer, exp.Subquery)
            and not outer.args.get("alias")
            and not isinstance(outer.parent, exp.From | exp.Join | exp.Lateral)
        ):
            return outer  # a scalar subquery: its value goes where the subquery stands
        self.problems.append(self._derived(who, name))
        return None

    @staticmethod
    def _derived(who: str, name: str) -> str:
        return (
            f"{who} is an output column of a WITH query, a subquery in FROM or a VALUES table, "
            f"which mcpkit does not follow; use :{name} directly where the value is compared"
        )

    def _output(self, item: exp.Expr, name: str) -> None:
        names = {item.alias_or_name, item.sql()}
        if isinstance(item, exp.Placeholder):
            names.add(f":{item.name}")
        for label in names:
            key = label.casefold()
            if key and key not in self.aliases:
                self.aliases[key] = name
                for column in self.tree.find_all(exp.Column):
                    if not column.table and column.name.casefold() == key:
                        self.follow(column, name, via=label)


def position_problems(
    tree: exp.Expr, dialect: str, types: Mapping[str, str], like: Mapping[str, str]
) -> list[str]:
    """Every parameter whose value may be read as something other than a plain value (empty when none).

    >>> import sqlglot
    >>> t = sqlglot.parse_one("SELECT :a AS a FROM t WHERE x = :b AND substring(n FROM :c) = 'q'",
    ...                       read="postgres")
    >>> position_problems(t, "postgres", {"a": "string", "b": "string", "c": "string"}, {})[0][:50]
    "parameter 'c' is used in `SUBSTRING(n FROM :c)`, w"

    Args:
        tree: The report's statement.
        dialect: Its sqlglot dialect (to show where a parameter stands).
        types: Each parameter's declared type.
        like: The `like:` parameters (checked by `like_problems` instead).
    """
    flows = _Flows(tree, types, dialect)
    for holder in list(tree.find_all(exp.Placeholder)):
        if holder.name not in like:
            flows.follow(holder, holder.name)
    return list(dict.fromkeys(flows.problems))
