"""What a `USE INDEX` pin cannot reach on MySQL/MariaDB (`masking.unpinned`, red team rth F5).

A hint written into a query reaches no view's body: the server reads the tables of an INVOKER or
DEFINER view, MERGE or TEMPTABLE, along any index, so a view's scan (and the join order it drives)
may follow a masked column when it reads, directly or through other views, a masked table that
may be read along an index holding one. The account sees no such index (information_schema.STATISTICS
lists an index only when it may read each of its columns), so a masked table counts unless the
catalog shows it has no secondary index at all (`INDEX_LENGTH` 0: InnoDB sums one page or more per
secondary index, updated when one is added, in place or by a copy; measured on 10.11), its PRIMARY
KEY is visible and it is InnoDB. A view whose definition is hidden (no SHOW VIEW), that reads a
relation the account does not see, or that calls a stored function, counts: fail closed.

Where a view counts, the representatives of text columns are not taken as data (`unpinned_data`),
except of a column whose equal values are byte-equal: a binary string, or a collation that is
binary and compares trailing spaces (`*_nopad_bin`; `utf8mb4_bin` pads, `'a' = 'a '`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Final

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.mysql.mask_routes import _BASE, _CASE, _VIEWS, view_closure
from mcpkit.sql.profiles.mysql.view_text import Relation, read_relations, routine_calls, unseen_relations

__all__ = ["EXACT_COLLATIONS", "exact_columns", "unpinned_views"]

EXACT_COLLATIONS: Final = re.compile(r"^(binary|\w+_nopad_bin|\w+_0900_bin)$", re.IGNORECASE)
"""Collations under which equal strings are equal byte for byte (no padding, no folding)."""

_EXACT: Final = (
    "SELECT table_schema, table_name, column_name, collation_name, data_type FROM information_schema.COLUMNS"
    " WHERE table_schema IN :schemas"
)
_BINARY: Final = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def unpinned_views(conn: Connection, follows: Collection[Relation]) -> dict[Relation, bool]:
    """Each view the account sees (database, name; case-folded) -> whether its read may follow a
    masked column: it reads one of `follows` (masked tables that may be read along an index over a
    masked column), or such a view, or what the check cannot see into."""
    views = [(str(s), str(n), str(t), str(d or "")) for s, n, t, d in conn.execute(text(_VIEWS))]
    known = {(str(s), str(n)) for s, n in conn.execute(text(_BASE))} | {(s, n) for s, n, _, _ in views}
    fold = (lambda name: name) if int(conn.execute(text(_CASE)).scalar() or 0) == 0 else str.lower
    schemas = {(s.casefold(), n.casefold()): s for s, n, _, _ in views}

    def counts(key: Relation, definition: str, found: Mapping[Relation, bool]) -> bool | None:
        if not definition or routine_calls(definition, key[0]):
            return True
        if unseen_relations(definition, schemas[key], known, fold):
            return True
        return True if any(r in follows or r in found for r in read_relations(definition, key[0])) else None

    found = view_closure(views, counts)
    return {key: key in found for key in schemas}


def exact_columns(conn: Connection, schemas: Collection[str]) -> dict[Relation, frozenset[str]]:
    """(database, relation), case-folded -> its columns (case-folded) whose equal values are
    byte-equal. Relations whose names differ only in case (lower_case_table_names 0) get none."""
    out: dict[Relation, set[str]] = {}
    spelt: dict[Relation, set[tuple[str, str]]] = {}
    if not schemas:
        return {}
    query = text(_EXACT).bindparams(bindparam("schemas", expanding=True))
    for schema, table, column, collation, kind in conn.execute(query, {"schemas": sorted(schemas)}):
        key = (str(schema).casefold(), str(table).casefold())
        spelt.setdefault(key, set()).add((str(schema), str(table)))
        binary = collation is None and str(kind).casefold() in _BINARY
        if binary or (collation is not None and EXACT_COLLATIONS.match(str(collation))):
            out.setdefault(key, set()).add(str(column).casefold())
    return {key: frozenset(cols) for key, cols in out.items() if len(spelt[key]) == 1}
