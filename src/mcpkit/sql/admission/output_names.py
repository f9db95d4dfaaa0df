"""The name PostgreSQL gives an unaliased select item (its FigureColname), for `reject_attribute_calls`.

`q.name` over a derived table whose item has no alias is a column only when PostgreSQL names that
item `name`; otherwise PostgreSQL calls `name(q)` (red team rt25 F1: `SELECT q.pg_column_size FROM
(SELECT count(*) FROM customers) q`). Each rule here was checked on PostgreSQL 15; where the name is
not sure (a special form sqlglot rewrites, `trim` named `btrim`, a user-defined type) the answer is
None and the name passes as no column: refused.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["item_name", "scalar_array", "values_names"]

# The column a cast names after its type when the operand has no name (`'1'::integer` is `int4`).
_TYPE_NAMES: dict[object, str] = {
    exp.DataType.Type.INT: "int4",
    exp.DataType.Type.BIGINT: "int8",
    exp.DataType.Type.SMALLINT: "int2",
    exp.DataType.Type.DOUBLE: "float8",
    exp.DataType.Type.DECIMAL: "numeric",
    exp.DataType.Type.VARCHAR: "varchar",
    exp.DataType.Type.CHAR: "bpchar",
    exp.DataType.Type.TEXT: "text",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
    exp.DataType.Type.JSON: "json",
    exp.DataType.Type.JSONB: "jsonb",
    exp.DataType.Type.UUID: "uuid",
    exp.DataType.Type.INTERVAL: "interval",
}

# Grammar forms sqlglot reads into a node without the name as written: PostgreSQL's name for each.
_FORMS: dict[type[exp.Expr], str] = {
    exp.Extract: "extract",
    exp.Substring: "substring",
    exp.StrPosition: "position",
    exp.Overlay: "overlay",
    exp.AtTimeZone: "timezone",
    exp.CurrentDate: "current_date",
    exp.CurrentTime: "current_time",
    exp.CurrentTimestamp: "current_timestamp",
    exp.CurrentUser: "current_user",
    exp.Localtime: "localtime",
    exp.Array: "array",
    exp.Exists: "exists",
    exp.Interval: "interval",
    exp.GroupConcat: "string_agg",
}

# Items PostgreSQL names `?column?`: constants and operators (sqlglot reads some operators, `~`,
# `->>`, as functions: those are left unnamed instead).
_UNNAMED = (exp.Literal, exp.Null, exp.Boolean, exp.Binary, exp.Unary, exp.Predicate)


def _written(node: exp.Func) -> str | None:
    """A call's name as written, when sqlglot renders it so (the name token has the rendered length)."""
    start, end = node.meta.get("start"), node.meta.get("end")
    if isinstance(node, exp.Anonymous):
        head = str(node.this)
    else:
        head = node.sql(dialect="postgres").split("(", 1)[0].strip()
    if not isinstance(start, int) or not isinstance(end, int) or end - start + 1 != len(head):
        return None  # quoted, or rewritten (`char_length` -> LENGTH, `now()` -> CURRENT_TIMESTAMP)
    return head.lower() if head.isidentifier() else None


def _figure(node: exp.Expr) -> tuple[str | None, int]:
    """PostgreSQL's FigureColnameInternal: a name and its strength (2 sure, 1 fallback, 0 none)."""
    if isinstance(node, exp.Column) and not node.is_star:
        ident = node.this
        return (str(ident.this) if ident.quoted else str(ident.this).lower()), 2
    if isinstance(node, exp.Dot):  # `(x).f` is f; `pg_catalog.upper(x)` is upper
        last = node.expression
        if isinstance(last, exp.Identifier):
            return (str(last.this) if last.quoted else str(last.this).lower()), 2
        return _figure(last) if isinstance(last, exp.Func) else (None, 2)
    if isinstance(node, exp.Paren | exp.Bracket | exp.Window | exp.Filter | exp.WithinGroup | exp.Collate):
        return _figure(node.this)
    if isinstance(node, exp.Cast):
        inner = _figure(node.this)
        if inner[1] > 1:
            return inner
        to = node.to
        if to.this == exp.DataType.Type.ARRAY and to.expressions:
            to = to.expressions[0]
        return _TYPE_NAMES.get(to.this) if isinstance(to, exp.DataType) else None, 1
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        result = _figure(default) if isinstance(default, exp.Expr) else (None, 0)
        return result if result[1] > 1 else ("case", 1)
    if isinstance(node, exp.Subquery):  # a scalar subquery: its one item's name
        items = node.this.selects if isinstance(node.this, exp.Select) else []
        return (item_name(items[0]) if items else None), 2
    for form, name in _FORMS.items():
        if type(node) is form and not node.meta:
            return name, 2
    if isinstance(node, exp.Func):
        return _written(node), 2
    if isinstance(node, _UNNAMED):
        return "?column?", 0
    return None, 2


def item_name(node: exp.Expr) -> str | None:
    """The output name PostgreSQL gives a select item, None when it is not sure."""
    if isinstance(node, exp.Alias):
        ident = node.args.get("alias")
        if isinstance(ident, exp.Identifier):
            return str(ident.this) if ident.quoted else str(ident.this).lower()
        return None
    name, strength = _figure(node)
    return name if strength else "?column?"


def values_names(values: exp.Values) -> list[str]:
    """VALUES without a column list names its columns column1, column2, ..."""
    first = values.expressions[0] if values.expressions else None
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    return [f"column{i}" for i in range(1, width + 1)]


def scalar_array(node: exp.Expr) -> bool:
    """Whether `node` is surely an array of a built-in scalar type: one-argument `unnest` of it has
    one column, named after the alias (`unnest(ARRAY[1, 2]) u` reads `u.u`)."""
    if isinstance(node, exp.Cast):
        to = node.to
        return to.this == exp.DataType.Type.ARRAY and any(t.this in _TYPE_NAMES for t in to.expressions[:1])
    if isinstance(node, exp.Array) and node.expressions:
        return all(_scalar(e) for e in node.expressions)
    return False


def _scalar(node: exp.Expr) -> bool:
    if isinstance(node, exp.Neg):
        return _scalar(node.this)
    if isinstance(node, exp.Cast):
        return node.to.this in _TYPE_NAMES
    return isinstance(node, exp.Literal | exp.Boolean)
