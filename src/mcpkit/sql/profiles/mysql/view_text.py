"""What a MariaDB view's stored definition (information_schema.VIEWS) reads, read to fail closed.

MariaDB stores a view's query re-printed: every table or view backquoted and qualified by its
database (`` `db`.`t` ``, a CTE by its name alone), columns qualified by an alias (`` `c`.`email` ``),
by a view's name, or by database and table, stored functions backquoted and followed directly by
their argument list. Relations follow `from`, any `... join` (`straight_join`: red team rt25 F0, a
keyword regex with a word boundary before `join` missed it) or a parenthesis; comma joins,
NATURAL, USING, CROSS and RIGHT JOINs are printed as `join` / `left join` with `on(...)`.

The reading does not rely on that keyword list to see what a view reads:

- `read_relations`: every backquoted chain at every backquote (string literals and CTE names,
  printed raw, may hold a stray backquote that would shift a left-to-right scan) gives each of
  its single names and each pair of consecutive names as a relation read. Over-approximation
  is the safe direction: an alias or column that happens to be named like a masked table counts.
- `unseen_relations`: a relation in a FROM/JOIN position, or any chain of two or more names whose
  first name no alias, CTE or relation of the text declares (so not a column reference), that the
  catalog does not hold: the check cannot see into it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from functools import lru_cache
from typing import Final

__all__ = ["Relation", "chains", "read_relations", "routine_calls", "unseen_relations"]

Relation = tuple[str, str]
"""`(database, name)`."""

_NAME: Final = r"`(?:[^`]|``)+`"
# Every maximal chain (not the tail of a longer one): a lookahead, so one match never hides another.
_CHAIN: Final = re.compile(rf"(?<!\.)(?=({_NAME}(?:\.{_NAME})*)(\(?))")
# A relation position: after `from`, any word ending in `join`, through opening parentheses.
_PLACED: Final = re.compile(rf"(?<![\w$])(?=(?:from|\w*join)\s*[(\s]*({_NAME}(?:\.{_NAME})*))", re.IGNORECASE)


def _parts(chain: str) -> tuple[str, ...]:
    return tuple(p[1:-1].replace("``", "`") for p in re.findall(_NAME, chain))


@lru_cache(maxsize=4096)  # start-up reads each definition once per round of the taint fixpoint
def chains(definition: str) -> tuple[tuple[tuple[str, ...], bool], ...]:
    """Each backquoted name chain starting at any backquote, with whether an argument list follows:
    the text between two names comes out as a name too, and a stray backquote hides nothing.

    >>> chains("select 'x`' AS `a`,`c`.`email` AS `e` from `d`.`t``q` `c`")[:5]
    ((("' AS ",), False), (('a',), False), ((',',), False), (('c', 'email'), False), (('.',), False))
    >>> [p for p, call in chains("select `f`(1),`x` from `d`.`t``q` `c`") if call or p[0].isalnum()]
    [('f',), ('x',), ('d', 't`q'), ('q',), ('c',)]
    """
    return tuple((_parts(m[1]), bool(m[2])) for m in _CHAIN.finditer(definition))


def read_relations(definition: str, db: str) -> list[Relation]:
    """`(database, relation)` pairs a view definition may read, case-folded, in order, without
    repeats: each pair of consecutive names of a chain, and each single name in `db`.

    >>> read = read_relations("select `c`.`e` from (`d`.`one` `o` straight_join `d`.`customers` `c`)", "d")
    >>> [r for r in read if r[1].isalnum()]
    [('d', 'c'), ('c', 'e'), ('d', 'e'), ('d', 'd'), ('d', 'one'), ('d', 'o'), ('d', 'customers')]
    """
    out: dict[Relation, None] = {}
    for parts, call in chains(definition.casefold()):
        if call:
            continue
        for i, part in enumerate(parts):
            out[(db.casefold(), part)] = None
            if i + 1 < len(parts):
                out[(part, parts[i + 1])] = None
    return list(out)


def routine_calls(definition: str, db: str) -> list[Relation]:
    """`(database, routine)` pairs of the stored functions a view definition calls, case-folded: a
    package routine as its package, whose body holds it; more parts name nothing the check knows.

    >>> routine_calls("select `f`(`d`.`t`.`id`),lcase(`t`.`a`),`e`.`g`(1),`d`.`p`.`f`(2) from `d`.`t`", "d")
    [('d', 'f'), ('e', 'g'), ('d', 'p')]
    """
    out: dict[Relation, None] = {}
    for parts, call in chains(definition.casefold()):
        if not call:
            continue
        if len(parts) > 3:
            out[(".".join(parts[:-1]), parts[-1])] = None
        else:
            out[(parts[0], parts[1]) if len(parts) > 1 else (db.casefold(), parts[0])] = None
    return list(out)


def _cte(definition: str, name: str) -> bool:
    """Whether the definition declares CTE `name` (MariaDB prints CTE names raw: `with e as (`)."""
    declared = rf"(?:\bwith(?:\s+recursive)?\s+|,\s*){re.escape(name)}\s*(?:\([^()]*\)\s*)?as\s*\("
    return re.search(declared, definition, re.IGNORECASE) is not None


def unseen_relations(
    definition: str, db: str, known: Collection[Relation], fold: Callable[[str], str]
) -> list[Relation]:
    """Relations a view definition may read that `known` (folded by `fold`) does not hold, in order.

    A name in a relation position counts (a name alone there is a CTE of the text, or `db`'s); so
    does a chain of two or more names whose first name the text declares nowhere else (an alias,
    a CTE, a relation's name qualify columns): it is `database`.`relation`.

    >>> known = {("d", "one"), ("d", "customers")}
    >>> unseen_relations("select `c`.`e` from (`d`.`one` `o` straight_join `h`.`v` `c`)", "d", known, str)
    [('h', 'v')]
    >>> cte = "with e as (select 1 AS `x`)select `e`.`x` AS `x` from `e` join `d`.`one`"
    >>> unseen_relations(cte, "d", known, str)
    []
    >>> unseen_relations("select `x`.`a` AS `a`,nextval(`h`.`s`) AS `n` from `d`.`one` `x`", "d", known, str)
    [('h', 's')]
    >>> unseen_relations("select `d`.`One`.`id` AS `id` from `d`.`One`", "d", known, str)
    [('d', 'One')]
    """
    folded = {(fold(s), fold(n)) for s, n in known}
    found = chains(definition)
    declared = {fold(p[0]) for p, call in found if len(p) == 1 and not call}
    declared |= {fold(p[1]) for p, call in found if len(p) == 2 and (fold(p[0]), fold(p[1])) in folded}
    out: dict[Relation, None] = {}
    for m in _PLACED.finditer(definition):
        parts = _parts(m[1])
        relation = (fold(parts[0]), fold(parts[1])) if len(parts) > 1 else (fold(db), fold(parts[0]))
        if relation not in folded and not (len(parts) == 1 and _cte(definition, parts[0])):
            out[relation] = None
    for parts, call in found:
        if call or len(parts) < 2:
            continue
        relation = (fold(parts[0]), fold(parts[1]))
        if relation not in folded and (len(parts) > 2 or relation[0] not in declared):
            out[relation] = None
    return list(out)
