"""Every FROM item a qualifier may name, for `reject_attribute_calls` (red team rt27 F1).

sqlglot scopes a non-LATERAL derived table, a CTE body and a JOIN's ON with the whole enclosing
FROM list in view. PostgreSQL does not: there a name is looked up in the enclosing query levels
only (LATERAL: the preceding items too; ON: the items of its own join), so `q` inside
`(SELECT q.pg_column_size AS v) d, (SELECT 1 AS pg_column_size) q` is the outer query's `q`, and
`pg_column_size(q)` ran. Rather than re-derive PostgreSQL's visibility rules, a qualifier here
stands for every FROM item of that name anywhere in the statement, at any level and in any
spelling; the caller passes `q.name` only when `name` is a column of each. Whatever PostgreSQL
picks is one of them, since it only ever resolves a qualifier to a FROM item of the statement.

A FROM item scoping does not list (a join's alias, the right side of a parenthesised join), or
whose name is not sure, is `UNSURE` for every qualifier it could match: refused. So is a
qualifier no FROM item of the statement is named (red team rt28 F1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

__all__ = ["UNSURE", "Candidate", "candidates", "cte_scopes", "folded"]

UNSURE = None
_WILDCARD = ""  # a FROM item whose name is not sure: it may be any qualifier's


def folded(node: exp.Expr | None) -> str:
    """An identifier as PostgreSQL folds it: quoted as written, else lower case."""
    if not isinstance(node, exp.Identifier):
        return node.name.lower() if node is not None else ""
    return str(node.this) if node.quoted else str(node.this).lower()


@dataclass(frozen=True)
class Candidate:
    """One FROM item: the node scoping keys it by, and what it reads (a relation, a scope)."""

    node: exp.Expr
    source: exp.Expr | Scope | None


def _alias(node: exp.Expr | None) -> str | None:
    alias = node.args.get("alias") if isinstance(node, exp.Expr) else None
    if isinstance(alias, exp.TableAlias):
        return folded(alias.this).lower() if isinstance(alias.this, exp.Identifier) else _WILDCARD
    return None


def _plain_name(node: exp.Expr, function_name: Callable[[exp.Expr], str | None]) -> str | None:
    """The name of a FROM item without an alias: a table's, else the function's (None: no FROM item)."""
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
        return folded(node.this).lower()
    if isinstance(node, exp.Table | exp.Unnest | exp.Lateral):
        return (function_name(node) or _WILDCARD).lower()
    return None


def _names(key: str, node: exp.Expr, function_name: Callable[[exp.Expr], str | None]) -> set[str]:
    """Every name a scoped FROM item may go by: the key scoping gives it, its alias (or its
    holder's: a parenthesised join's alias keys its first item), or its table or function name.
    More names only make more qualifiers check this item too."""
    names = {key.lower()} if key else set()
    for holder in _held(node):  # every node that counts as this item's (`_held`) lends its alias
        alias = _alias(holder)
        if alias is not None:
            names.add(alias)
    if not key and not names:
        names.add((_plain_name(node, function_name) or _WILDCARD).lower())
    return names


def _held(node: exp.Expr) -> Iterator[exp.Expr]:
    yield node
    if node.parent is not None:
        yield node.parent
    if isinstance(node.this, exp.Expr):
        yield node.this


def candidates(
    tree: exp.Expr, root: Scope, function_name: Callable[[exp.Expr], str | None]
) -> Callable[[str], list[Candidate] | None]:
    """A lookup: qualifier (folded) -> every FROM item of the statement it may name, or `UNSURE`."""
    entries: list[tuple[set[str], Candidate]] = []
    covered: set[int] = set()
    for scope in root.traverse():
        for key, (node, source) in scope.selected_sources.items():
            entries.append((_names(key, node, function_name), Candidate(node, source)))
            covered.update(id(n) for n in _held(node))
    unlisted: set[str] = set()  # names of FROM items scoping does not list
    for alias in tree.find_all(exp.TableAlias):
        holder = alias.parent
        if holder is not None and not isinstance(holder, exp.CTE) and id(holder) not in covered:
            unlisted.add(_alias(holder) or _WILDCARD)
    for item in tree.find_all(exp.Table, exp.Unnest, exp.Lateral):
        if _alias(item) is None and id(item) not in covered:
            name = _plain_name(item, function_name)
            if name is not None:
                unlisted.add(name)

    def lookup(qualifier: str) -> list[Candidate] | None:
        wanted = qualifier.lower()
        if wanted in unlisted or _WILDCARD in unlisted:
            return UNSURE
        found = [c for names, c in entries if wanted in names or _WILDCARD in names]
        # No FROM item of that name here: PostgreSQL may still match one (a name it shortens,
        # red team rt28 F1, or a rule not modelled here), and call `name(item)`. Fail closed.
        return found or UNSURE

    return lookup


def cte_scopes(tree: exp.Expr, root: Scope) -> dict[str, list[Scope | None]]:
    """Every CTE of the statement by name (lower case), with the scope of its body (None: not
    scoped): a table name may be any of them (sqlglot's choice is not always PostgreSQL's)."""
    by_body = {id(s.expression): s for s in root.traverse()}
    found: dict[str, list[Scope | None]] = {}
    for cte in tree.find_all(exp.CTE):
        alias = cte.args.get("alias")
        name = folded(alias.this).lower() if isinstance(alias, exp.TableAlias) else _WILDCARD
        found.setdefault(name, []).append(by_body.get(id(cte.this)))
    return found
