"""Pass: no relation that shows other sessions' activity or server internals (per engine,
`function_tables.<engine>.NEVER_RELATIONS`), in any spelling: quoted, schema-qualified, any case;
and no value column of a readable catalog (`NEVER_VALUES`: `pg_attribute.attmissingval`, ...)."""

from __future__ import annotations

from sqlglot import exp

from mcpkit.sql.admission.function_tables import RelationRule, ValueRule
from mcpkit.sql.admission.function_tables.tables import NEVER_RELATIONS, NEVER_VALUES
from mcpkit.sql.errors import refuse

__all__ = ["reject_relations"]


def _rules(dialect: str) -> tuple[RelationRule, ...]:
    if dialect in NEVER_RELATIONS:
        return NEVER_RELATIONS[dialect]
    return tuple(r for rules in NEVER_RELATIONS.values() for r in rules)


def _value_rules(dialect: str) -> tuple[ValueRule, ...]:
    if dialect in NEVER_VALUES:
        return NEVER_VALUES[dialect]
    if dialect in NEVER_RELATIONS:  # an engine with no such catalog
        return ()
    return tuple(r for rules in NEVER_VALUES.values() for r in rules)


def _reject_values(tree: exp.Expr, rules: tuple[ValueRule, ...]) -> None:
    """Refuse a read of a `ValueRule` column: by name (any identifier of that name, `(a).col` too),
    through `*` (but `count(*)`), a whole-row reference to the relation (its name or alias as a
    column: `to_json(a)`) or a column alias list, which renames its columns by position."""
    for rule in rules:
        names: set[str] = set()
        relation = ""
        for table in tree.find_all(exp.Table):
            if not rule.covers(table.db.lower() or None, table.name.lower()):
                continue
            relation = table.name.lower()
            names.add(relation)
            alias = table.args.get("alias")
            if isinstance(alias, exp.TableAlias):
                names.add(alias.name.lower())
                if alias.columns:
                    _refuse_value(rule, relation)
        if not names:
            continue
        for node in tree.find_all(exp.Identifier, exp.Star, exp.Column):
            if isinstance(node, exp.Identifier):
                bad = node.name.lower() in rule.columns
            elif isinstance(node, exp.Star):
                bad = not isinstance(node.parent, exp.Count)
            elif isinstance(node, exp.Column):
                bad = not node.table and node.name.lower() in names
            else:
                bad = False
            if bad:
                _refuse_value(rule, relation)


def _refuse_value(rule: ValueRule, name: str) -> None:
    columns = " and ".join(sorted(rule.columns))
    shown = "".join(c for c in name if c.isalnum() or c in "_.$")[:64]
    refuse(
        "relation",
        f"{shown}.{columns} {'are' if len(rule.columns) > 1 else 'is'} never readable on this server, nor"
        f" `*` or a whole row where {shown} is read: it {rule.why}. Name the columns you need.",
    )


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
    _reject_values(tree, _value_rules(dialect))
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
