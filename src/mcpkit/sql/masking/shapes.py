"""Shapes a masked read may not take, and the one normalisation the other passes rely on.

    admitted tree --normalise_calls--> pg_catalog.f(...), "f"(...) written as f(...)
                  --refuse_shapes--> NATURAL JOIN, USING beside a source of unknown columns,
                                     per-row clocks, seeded or sequential generators: refused

Both run only when the query reads a masked table or a view.

- NATURAL JOIN (and USING beside a table function) joins on columns the analysis may not see:
  `customers NATURAL JOIN JSON_TABLE(... COLUMNS (email ...))` matches each row to its hidden
  email, and MariaDB and SQLite check no privilege on the join columns.
- A function whose value changes from one row to the next in evaluation order (a seeded RAND,
  a time-based UUID, a per-row clock, a sequence, LAST_INSERT_ID(x), sqlite_offset) numbers the
  rows in scan order, which an index on a masked column may set; so does an unseeded generator
  whose values give its state (`Profile.guessable_random`: MariaDB RAND(), PostgreSQL random()).
"""

from __future__ import annotations

import itertools
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from mcpkit.sql.dialects import read_dialect, sent_dialect
from mcpkit.sql.masking.taint import refuse_mask
from mcpkit.sql.profiles import profile_class

__all__ = [
    "USER_AGGREGATE",
    "normalise_calls",
    "refuse_measures",
    "refuse_shapes",
    "row_order_call",
    "written_call",
]

_NATURAL: Final = (
    "Over a table with masked columns or a view, NATURAL JOIN is not answered (it joins on "
    "columns the check cannot see): write the join with ON and the visible columns."
)
_USING: Final = (
    "Over a table with masked columns or a view, JOIN ... USING beside a table function is not "
    "answered: write the join with ON and the visible columns."
)
_PER_ROW: Final = (
    "Over a table with masked columns or a view, functions whose value changes from row to row "
    "in the order rows are read (RAND and random(), UUID, SYSDATE, clock_timestamp, sequences, "
    "user-defined functions) are not answered: that order can follow a masked value."
)
_QUALIFIED: Final = (
    "Over a table with masked columns or a view, call aggregates by their plain name "
    "(string_agg, not a schema-qualified or quoted name)."
)

_MEASURE: Final = (
    "While columns are masked, storage sizes (pg_relation_size, pg_table_size, pg_indexes_size, "
    "pg_total_relation_size, pg_database_size) are not answered: they measure the masked values."
)
# PostgreSQL's size functions: a table's size sums its masked values' lengths, an index's size
# counts their distinct values (B-tree deduplication). Refused whatever the query reads.
_MEASURES: Final = frozenset(
    {
        "pg_relation_size",
        "pg_table_size",
        "pg_indexes_size",
        "pg_total_relation_size",
        "pg_database_size",
        "pg_tablespace_size",
        "pg_column_size",
    }
)
# Functions the masking passes know by name; a qualified or quoted spelling of one is suspect.
_ORDER_AGGREGATES: Final = frozenset(
    {
        "string_agg",
        "array_agg",
        "json_agg",
        "jsonb_agg",
        "json_agg_strict",
        "jsonb_agg_strict",
        "json_object_agg",
        "jsonb_object_agg",
        "json_object_agg_strict",
        "jsonb_object_agg_strict",
        "json_object_agg_unique",
        "jsonb_object_agg_unique",
        "json_object_agg_unique_strict",
        "jsonb_object_agg_unique_strict",
        "json_arrayagg",
        "json_objectagg",
        "xmlagg",
        "group_concat",
        "json_group_array",
        "json_group_object",
    }
)


def _name(func: exp.Anonymous) -> tuple[str, bool]:
    this = func.this
    if isinstance(this, exp.Identifier):
        return this.name, this.quoted
    return str(this), False


def _qualifier(dot: exp.Dot) -> list[exp.Expr]:
    parts: list[exp.Expr] = []
    node: exp.Expr = dot
    while isinstance(node, exp.Dot):
        parts.insert(0, node.this)
        node = node.this
    return parts


def normalise_calls(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Write `pg_catalog.f(...)` and `"f"(...)` as `f(...)`, so every pass sees the same call.

    A call qualified by another schema (a user's function) or quoted with another case is left
    alone, and refused if its name is that of an order-dependent aggregate. Returns the tree
    (a normalised copy when anything changed).
    """
    calls = [
        f
        for f in tree.find_all(exp.Anonymous)
        if isinstance(f.this, exp.Identifier) or isinstance(f.parent, exp.Dot)
    ]
    if not calls:
        return tree
    tree = tree.copy()
    for func in [
        f
        for f in tree.find_all(exp.Anonymous)
        if isinstance(f.this, exp.Identifier) or isinstance(f.parent, exp.Dot)
    ]:
        name, quoted = _name(func)
        target: exp.Expr = func
        plain = not quoted or name == name.casefold()
        if isinstance(func.parent, exp.Dot) and func.arg_key == "expression":
            dot = func.parent
            while isinstance(dot.parent, exp.Dot) and dot.arg_key == "expression":
                dot = dot.parent
            schema = [p for p in _qualifier(dot) if isinstance(p, exp.Identifier | exp.Column)]
            names = [
                p.name if (isinstance(p, exp.Identifier) and p.quoted) else p.name.casefold() for p in schema
            ]
            plain = plain and names == [profile_class(dialect).builtin_schema]
            target = dot
        if not plain:
            if name.casefold() in _ORDER_AGGREGATES:
                refuse_mask(f"qualified or quoted aggregate {name}", message=_QUALIFIED)
            continue
        args = ", ".join(a.sql(dialect=sent_dialect(dialect)) for a in func.expressions)
        try:
            replacement = sqlglot.parse_one(f"{name.casefold()}({args})", read=read_dialect(dialect))
        except sqlglot.errors.SqlglotError:
            refuse_mask(f"cannot normalise the call {name}", unchecked=True)
        target.replace(replacement)
    return tree


def _unknown_columns(source: exp.Expr) -> bool:
    """A FROM/JOIN source whose columns the schema does not list (a table function, UNNEST)."""
    if isinstance(source, exp.Table):
        return not isinstance(source.this, exp.Identifier)
    return isinstance(source, exp.Unnest | exp.Lateral | exp.Values) or not isinstance(
        source, exp.Subquery | exp.Table
    )


USER_AGGREGATE: Final = "mcpkit_user_aggregate"  # meta key: a call of a user's aggregate


def refuse_shapes(
    tree: exp.Expr,
    dialect: str,
    per_row: frozenset[str] = frozenset(),
    aggregates: frozenset[str] = frozenset(),
) -> None:
    """Refuse the joins and per-row functions a masked read may not use (see the module); `per_row`:
    the user's functions that count as per-row ones (`KnownSchema.per_row`, red team rt29 F2). A call
    named in `aggregates` (`KnownSchema.aggregates`) is marked `USER_AGGREGATE` (red team v1 L3)."""
    for join in tree.find_all(exp.Join):
        if "NATURAL" in (
            str(join.args.get("method") or "").upper(),
            str(join.args.get("kind") or "").upper(),
        ):
            refuse_mask("NATURAL JOIN over a masked read", message=_NATURAL)
        if join.args.get("using"):
            select = join.parent
            sources: list[exp.Expr] = []
            if isinstance(select, exp.Select):
                from_ = select.args.get("from_") or select.args.get("from")
                if isinstance(from_, exp.From):
                    sources.append(from_.this)
                sources += [j.this for j in select.args.get("joins") or []]
            if not sources or any(_unknown_columns(s) for s in sources):
                refuse_mask("USING beside a source of unknown columns", message=_USING)
    for func in tree.find_all(exp.Func):
        if isinstance(func, exp.Anonymous) and _name(func)[0].casefold() in aggregates:
            func.meta[USER_AGGREGATE] = True
        name = row_order_call(func, dialect, per_row)
        if name is not None:
            refuse_mask(f"per-row function {name} over a masked read", message=_PER_ROW)


def row_order_call(func: exp.Func, dialect: str, more: frozenset[str] = frozenset()) -> str | None:
    """The name of `func` when its value changes from row to row in the order rows are read (the
    profile's `row_order_functions` and `guessable_random`, a seeded RAND, a time-based UUID,
    LAST_INSERT_ID(x), or a name in `more`: a stored body's volatile functions); else None. The one
    test of both the per-call analysis and the stored-body check (`masking.view_order`)."""
    facts = profile_class(dialect)
    if (package := _through(func, more)) is not None:
        return package
    if facts.accent_blind_routines and (odd := _unfolded(func)) is not None:
        return odd
    if isinstance(func, exp.Anonymous):
        name = _name(func)[0].casefold()
        if name == "last_insert_id" and func.expressions:
            return name
    else:
        name = func.sql_name().casefold()
    per_row = facts.row_order_functions | facts.guessable_random | more
    seeded = isinstance(func, exp.Rand) and func.this is not None
    if name in per_row or seeded or (isinstance(func, exp.Uuid) and facts.time_based_uuid):
        return name
    if facts.accent_blind_routines and not name.isascii():  # `tíck(x)` calls `tick` (rt34 F6)
        return name
    if more and not isinstance(func, exp.Anonymous):  # a typed node under the engine's own name
        shown = func.sql(dialect=sent_dialect(dialect)).split("(", 1)[0].strip().casefold()
        return shown if shown in more else None
    return None


def _through(func: exp.Func, names: frozenset[str]) -> str | None:
    """The qualifier of `func` that is one of `names`: `db.pkg.f(...)` calls through MariaDB package
    `pkg`, whose functions share its state (red team rt34 F2)."""
    parent = func.parent
    if not names or not isinstance(parent, exp.Dot) or parent.expression is not func:
        return None
    for part in parent.this.find_all(exp.Identifier):
        name = part.name
        if name.casefold() in names:
            return f"{name}.{_name(func)[0] if isinstance(func, exp.Anonymous) else func.sql_name()}"
    return None


def _unfolded(func: exp.Func) -> str | None:
    """A non-ASCII qualifier of a MariaDB call: `db.pķg.f(...)` may call through package `pkg`, as
    MariaDB compares routine names accent-blind (red team rt34 F6; the name itself: below)."""
    parent = func.parent
    if not isinstance(parent, exp.Dot) or parent.expression is not func:
        return None
    return next((i.name for i in parent.this.find_all(exp.Identifier) if not i.name.isascii()), None)


def written_call(statement: str, dialect: str, names: frozenset[str]) -> str | None:
    """The first name of `names` (case-folded) that `statement` calls as written, or None. Stored SQL
    runs as written, not as sqlglot renders it: `len(x)` is LENGTH to sqlglot but MariaDB's stored
    `len`, `ifnull(x, 0)` is COALESCE to sqlglot but PostgreSQL's user `ifnull` (red team rt32 F1/F2)."""
    try:
        tokens = sqlglot.Dialect.get_or_raise(read_dialect(dialect)).tokenize(statement)
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return None  # the order check reports SQL it cannot parse
    blind = profile_class(dialect).accent_blind_routines  # `tíck(x)` calls `tick` (rt34 F6)
    for token, after in itertools.pairwise(tokens):
        called = token.text.casefold()
        if after.token_type == TokenType.L_PAREN and (called in names or (blind and not called.isascii())):
            return token.text
    for name, dot, _, paren in zip(tokens, tokens[1:], tokens[2:], tokens[3:], strict=False):
        through = dot.token_type == TokenType.DOT and paren.token_type == TokenType.L_PAREN
        if through and name.text.casefold() in names:  # `pkg.f(` through a package (red team rt34 F2)
            return name.text
    return None


def refuse_measures(tree: exp.Expr) -> None:
    """Refuse a storage-size function under any spelling (qualified, quoted) while masks are on."""
    for func in tree.find_all(exp.Anonymous):
        if _name(func)[0].casefold() in _MEASURES:
            refuse_mask(f"size function {_name(func)[0]} while masks are on", message=_MEASURE)
