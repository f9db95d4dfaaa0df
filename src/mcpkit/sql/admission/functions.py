"""Function calls as the database will see them: every name a call may go by, and where it sits.

The names a call is checked under are the ones in the SQL that is sent: sqlglot may write a known
function under another name (IFNULL as COALESCE), so the generated name is what the allowlist sees,
and every alias sqlglot knows is what the never list sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator

from mcpkit.sql.admission.function_tables import matches
from mcpkit.sql.admission.function_tables.tables import DENYLISTS, table_for
from mcpkit.sql.grammar import sent_dialect

__all__ = [
    "DENYLISTS",
    "SYNTAX_FUNCTIONS",
    "FunctionCall",
    "function_calls",
    "matches",
    "table_for",
]

# SQL syntax sqlglot models as functions; an operator allowlist never has to list these.
SYNTAX_FUNCTIONS: Final = frozenset(
    {
        "cast",
        "try_cast",
        "extract",
        "exists",
        "array",
        "row",
        "case",
        "position",
        "substring",
        "trim",
        "overlay",
        "collate",
        "current_date",
        "current_time",
        "current_timestamp",
        "localtime",
        "localtimestamp",
        "current_user",
        "session_user",
        "user",
        "interval",
    }
)


@dataclass(frozen=True)
class FunctionCall:
    """One function call in a tree.

    `name` is the name the database will see (the generated one when known); `names` adds every
    alias sqlglot knows for the same function, so a never-list entry for any of them hits.
    `is_call` is false for syntax sqlglot models as a function (`x ->> 'a'`, `CASE`,
    `CURRENT_DATE`): it is written without `name(...)`. `in_from` marks a table-valued call.
    """

    name: str
    names: frozenset[str]
    schema: str | None
    node: exp.Func
    is_call: bool
    db_name: str
    db_schema: str | None
    in_from: bool = False


_MARK: Final = "mcpkit_func"
_CAPTURING: dict[type[Generator], type[Generator]] = {}


def _head(text: str) -> str | None:
    # The name written before "(", when it is a plain identifier (this reads generated SQL only).
    head, paren, _ = text.partition("(")
    head = head.strip().strip('"`')
    if paren and head and all(c.isalnum() or c in "_$" for c in head):
        return head.lower()
    return None


def _capturing(base: type[Generator]) -> type[Generator]:
    # A generator that notes, for each marked Func node, the text it wrote for it: one generation
    # of the whole tree instead of one per call (which was quadratic: a 1,000-term OR took 80 s).
    found = _CAPTURING.get(base)
    if found is None:

        class Capturing(base):  # type: ignore[valid-type,misc]
            heads: dict[int, str | None]

            def sql(self, expression: Any, key: str | None = None, comment: bool = True) -> str:
                text: str = super().sql(expression, key, comment)
                if key is None and isinstance(expression, exp.Func):
                    marker = expression.meta.get(_MARK)
                    if marker is not None and marker not in self.heads:
                        self.heads[marker] = _head(text)
                return text

        found = _CAPTURING[base] = Capturing
    return found


def _generated_names(funcs: list[exp.Func], tree: exp.Expr, dialect: str) -> list[str | None]:
    writer = Dialect.get_or_raise(sent_dialect(dialect))
    for i, node in enumerate(funcs):
        node.meta[_MARK] = i
    try:
        gen: Any = _capturing(writer.generator_class)(
            dialect=writer, normalize_functions=False, comments=False
        )
        gen.heads = {}
        gen.generate(tree, copy=True)
        heads: dict[int, str | None] = gen.heads
    finally:
        for node in funcs:
            node.meta.pop(_MARK, None)
    out: list[str | None] = []
    index = {id(node): i for i, node in enumerate(funcs)}
    for i, node in enumerate(funcs):
        if i in heads:
            out.append(heads[i])
        elif isinstance(node, exp.Connector):  # AND/OR chains are written flat, never as a call
            out.append(None)
        elif isinstance(node, exp.If) and node.arg_key == "ifs" and index.get(id(node.parent)) in heads:
            # A WHEN ... THEN its CASE wrote (generating it alone copied the branch: quadratic in
            # nested guards, 0.6 s of the second look at 25 guarded searches on MariaDB).
            out.append(None)
        else:  # rewritten away by a transform during generation: generate it alone
            out.append(_head(node.sql(dialect=writer, normalize_functions=False, comments=False)))
    return out


def _db_identifier(node: exp.Expr) -> str:
    # How the database resolves a name: quoted names keep their case, unquoted ones fold.
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return _db_identifier(node.this)
    return node.sql().lower()


def _qualifier(node: exp.Expr) -> str | None:
    parts: list[str] = []
    child, parent = node, node.parent
    if isinstance(parent, exp.Table) and node.arg_key == "this":  # FROM schema.f(...)
        names = [parent.args.get("catalog"), parent.args.get("db")]
        return ".".join(_db_identifier(n) for n in names if isinstance(n, exp.Expr)) or None
    while isinstance(parent, exp.Dot) and parent.expression is child:
        parts.insert(0, _db_identifier(parent.this))
        child, parent = parent, parent.parent
    return ".".join(parts) or None


def function_calls(tree: exp.Expr, dialect: str) -> Iterator[FunctionCall]:
    """Every function call in `tree`, with all the names it may go by.

    Args:
        tree: A parsed statement.
        dialect: The sqlglot dialect the SQL will be generated in.

    Yields:
        One `FunctionCall` per `exp.Func` node (select list, FROM, WHERE, anywhere).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT ifnull(a, 0), app.f(1) FROM t", read="mysql")
    >>> [(c.name, c.schema) for c in function_calls(tree, "mysql")]
    [('coalesce', None), ('f', 'app')]
    """
    funcs = list(tree.find_all(exp.Func))
    generated_names = _generated_names(funcs, tree, dialect) if funcs else []
    for node, generated in zip(funcs, generated_names, strict=True):
        db_name: str | None = None
        if isinstance(node, exp.Anonymous):
            this = node.this
            written = (this.name if isinstance(this, exp.Identifier) else str(this)).lower()
            db_name = _db_identifier(this) if isinstance(this, exp.Identifier) else written
            names = {written}
        else:
            written = node.sql_name().lower()
            names = {written, *(n.lower() for n in getattr(type(node), "_sql_names", ()))}
        if generated:
            names.add(generated)
        anonymous = isinstance(node, exp.Anonymous)
        name = written if anonymous else (generated or written)
        schema = _qualifier(node)
        yield FunctionCall(
            name=name,
            names=frozenset(names),
            schema=schema.lower() if schema else None,
            node=node,
            is_call=anonymous or generated is not None,
            db_name=db_name or name,
            db_schema=schema,
            in_from=isinstance(node.parent, exp.Table) and node.arg_key == "this",
        )
