"""Joins by name over a table with columns the account cannot see (MySQL/MariaDB column grants).

MariaDB checks no column privilege on the columns `JOIN ... USING (c)` and `NATURAL JOIN` join on
(red team rt19mask F4, F5). A column the account holds no privilege on is missing from the catalog
it reads, so the analysis knows it only where a rule names it literally: a glob rule (`cards.p?n`)
or a derived mask (a foreign-key copy `grant --mask` withheld) left it unknown, the join was
admitted and `cards JOIN (SELECT '000000' AS pin ...) g USING (pin)` compared the hidden PINs
with every guess in one call. So over such a table (`KnownSchema.partial`: its `SELECT *` is
refused), a NATURAL JOIN is refused, and so is a USING name that is not one of its known columns,
whatever the masks say.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.masking.schema import KnownSchema
from mcpkit.sql.masking.taint import refuse_mask

__all__ = ["refuse_hidden_joins"]

_HIDDEN: Final = (
    "A table here has columns this server may not read, so NATURAL JOIN and JOIN ... USING on a "
    "name that is not one of its readable columns are not answered; join with ON over readable columns."
)


def _sources(join: exp.Join, tree: exp.Expr) -> list[exp.Table]:
    """The tables of the join's own FROM and JOIN list (a derived table carries no hidden column:
    each column it reads is named, and so privilege-checked); every table of the query where the
    join hangs elsewhere."""
    owner = join.parent
    if isinstance(owner, exp.Select):
        from_ = owner.args.get("from_") or owner.args.get("from")
        found = [from_.this] if isinstance(from_, exp.From) else []
    elif isinstance(owner, exp.Table):  # a parenthesised join: `(cards c JOIN g USING (pin))`
        found = [owner]
    else:
        return list(tree.find_all(exp.Table))
    found += [j.this for j in owner.args.get("joins") or []]
    return [s for s in found if isinstance(s, exp.Table)]


def refuse_hidden_joins(tree: exp.Expr, known: KnownSchema) -> None:
    """Refuse a NATURAL JOIN, or a USING name, that may join on a column the account cannot see."""
    if not known.partial:
        return
    for join in tree.find_all(exp.Join):
        natural = "NATURAL" in (
            str(join.args.get("method") or "").upper(),
            str(join.args.get("kind") or "").upper(),
        )
        using = {str(u.name).casefold() for u in join.args.get("using") or []}
        if not (natural or using):
            continue
        for table in _sources(join, tree):
            if not known.is_partial(table):
                continue
            if natural:
                refuse_mask("NATURAL JOIN over a table with hidden columns", message=_HIDDEN)
            readable = {name.casefold() for name in known.columns(table) or {}}
            if using - readable:
                refuse_mask("USING a name that may be a hidden column", message=_HIDDEN)
