"""A report's SQL with named bind parameters, admitted the way `execute_query` admits a query.

Admission refuses every bind parameter (a model's query must carry its values), so a report's SQL
is checked here: every `:name` must be a declared parameter and every parameter used; the row cap
is built in with admission's own rewrites; then the text to send is parsed again, its placeholders
replaced by typed literals, and that copy must pass `admit` unchanged in meaning. Values are only
ever bound by the driver (SQLAlchemy `text()` turns `:name` into its paramstyle), never spliced in.
A parameter in a pattern position must be a `like:` parameter standing alone (see `like`); every
other parameter must stand where the database reads a plain value (see `positions`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission import REWRITES, FunctionCatalog, FunctionPolicy, admit, parse_statement, run_passes
from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.reports.like import like_problems, with_escape
from mcpkit.sql.reports.positions import position_problems
from mcpkit.sql.reports.spec import ParamSpec

__all__ = ["BindError", "BoundSql", "prepare_sql", "with_literals"]


def _literal(kind: str) -> exp.Expr:
    if kind == "integer":
        return exp.Literal.number(1)
    if kind == "number":
        return exp.Literal.number(1.5)
    if kind == "string":
        return exp.Literal.string("x")
    if kind == "boolean":
        return exp.Boolean(this=True)
    return exp.Cast(this=exp.Literal.string("2000-01-01"), to=exp.DataType.build("DATE"))


_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BindError(ValueError):
    """The SQL's placeholders do not match the declared parameters."""


@dataclass(frozen=True)
class BoundSql:
    """The SQL of one report, ready to run.

    Attributes:
        send: The text to run with SQLAlchemy `text()`: `:name` placeholders, the row cap built in.
        checked: The text admission saw (the same, placeholders as typed literals).
        tree: `send` as a tree, placeholders as `:name` variables (what masking plans on).
        names: The parameter names the SQL uses.
    """

    send: str
    checked: str
    tree: exp.Expr
    names: tuple[str, ...]


def _placeholders(tree: exp.Expr) -> list[str]:
    names: list[str] = []
    for node in tree.find_all(exp.Placeholder, exp.Parameter):
        if isinstance(node, exp.Parameter) or not _NAME.fullmatch(node.name or ""):
            raise BindError("use named parameters written :name (not ?, $1 or @x)")
        names.append(node.name)
    return names


def with_literals(tree: exp.Expr, types: dict[str, str]) -> exp.Expr:
    """A copy of `tree` with each `:name` placeholder replaced by a literal of its declared type.

    >>> import sqlglot
    >>> t = sqlglot.parse_one("SELECT * FROM t WHERE y = :year AND r = :region", read="sqlite")
    >>> with_literals(t, {"year": "integer", "region": "string"}).sql()
    "SELECT * FROM t WHERE y = 1 AND r = 'x'"
    """

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name in types:
            return _literal(types[node.name])
        return node

    return tree.transform(swap)


def prepare_sql(
    sql: str,
    dialect: str,
    params: Sequence[ParamSpec],
    *,
    limit: int,
    functions: FunctionPolicy | None = None,
    catalog: FunctionCatalog | None = None,
    casts: Mapping[str, str] | None = None,
) -> BoundSql:
    """Check a report's SQL against its parameters and admission; build the text to send.

    >>> from mcpkit.sql.reports.spec import ParamSpec
    >>> b = prepare_sql("SELECT region FROM sales WHERE year = :year", "postgres",
    ...                 [ParamSpec("year", "integer")], limit=26)
    >>> b.send
    'SELECT region FROM sales WHERE year = :year LIMIT 26'
    >>> b.checked
    'SELECT region FROM sales WHERE year = 1 LIMIT 26'

    Args:
        sql: The report's SQL, with `:name` placeholders.
        dialect: The database's sqlglot dialect.
        params: The declared parameters.
        limit: The row cap plus one (rows to fetch).
        functions: The function policy admission uses.
        catalog: The volatility lookup admission uses.
        casts: Parameters sent as `CAST(:name AS type)` (PostgreSQL, for a parameter it cannot type).

    Returns:
        The text to send, the text admission saw, and the parameter names.

    Raises:
        BindError: a placeholder is not declared, a parameter is unused, or not `:name`.
        Refused: admission refused the query (the message says why).
    """
    types = {p.name: p.type for p in params}
    like = {p.name: p.like for p in params if p.like}
    tree = parse_statement(sql, dialect)
    used = _placeholders(tree)
    unknown = sorted(set(used) - set(types))
    if unknown:
        raise BindError(f"the SQL uses :{unknown[0]}, which is not a declared parameter")
    unused = [p.name for p in params if p.name not in used]
    if unused:
        raise BindError(f"parameter {unused[0]!r} is declared but the SQL never uses :{unused[0]}")
    misuse = like_problems(tree, like) or position_problems(tree, dialect, types, like)
    if misuse:
        raise BindError("; ".join(misuse))
    tree = with_escape(tree, like)

    def admitted(candidate: exp.Expr) -> str:
        literal = with_literals(candidate, types).sql(
            dialect=dialect, normalize_functions=False, comments=False
        )
        return admit(literal, dialect, functions=functions, catalog=catalog).sql

    # First look: the statement itself (a DELETE is refused as a write, before any rewrite).
    admitted(tree)
    capped = run_passes(tree.copy(), REWRITES, limit=limit, dialect=dialect)
    typed = casts or {}

    def named(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Placeholder):
            return node
        var = exp.Var(this=f":{node.name}")
        cast = typed.get(node.name)
        return exp.Cast(this=var, to=exp.DataType.build(cast, dialect=dialect)) if cast else var

    sent = capped.transform(named)
    text = sent.sql(dialect=sent_dialect(dialect), normalize_functions=False, comments=False)
    # Second look, as admission does: what is sent is what is checked.
    again = parse_statement(text, dialect)
    if sorted(set(_placeholders(again))) != sorted(set(used)):
        raise BindError("the placeholders do not survive regeneration; write them as :name")
    checked = admitted(again)
    return BoundSql(send=text, checked=checked, tree=sent, names=tuple(dict.fromkeys(used)))
