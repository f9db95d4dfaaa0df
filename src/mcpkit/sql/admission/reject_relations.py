"""Pass: no relation that shows other sessions' activity or server internals (per engine,
`function_tables.<engine>.NEVER_RELATIONS`), in any spelling: quoted, schema-qualified, any case."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.admission.function_tables import RelationRule
from mcpkit.sql.admission.function_tables.tables import NEVER_RELATIONS
from mcpkit.sql.errors import refuse

__all__ = ["reject_relations"]


def _rules(dialect: str) -> tuple[RelationRule, ...]:
    if dialect in NEVER_RELATIONS:
        return NEVER_RELATIONS[dialect]
    return tuple(r for rules in NEVER_RELATIONS.values() for r in rules)


def reject_relations(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Refuse a read of a never-readable relation anywhere in the tree.

    Names are compared in lower case whatever the quoting: a quoted `"PG_LOCKS"` is not the
    catalog view, but refusing it costs nothing and leaves no spelling to argue about.

    >>> import sqlglot
    >>> reject_relations(sqlglot.parse_one("SELECT a FROM t"), "postgres").sql()
    'SELECT a FROM t'

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect.

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `relation`.
    """
    rules = _rules(dialect)
    if not rules:
        return tree
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if not name:
            continue
        schema = table.db.lower() or None
        for rule in rules:
            if rule.refuses(schema, name):
                shown = "".join(c for c in f"{schema}.{name}" if c.isalnum() or c in "_.$")[:64]
                shown = shown if schema else shown.split(".", 1)[1]
                refuse("relation", f"The relation {shown} is never readable on this server: it {rule.why}.")
    return tree
