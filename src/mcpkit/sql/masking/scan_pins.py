"""Pin the order the database reads a masked table in to its visible keys (red teams rtA F1/F2/F5,
rtB F1-F4): order-dependent answers (which of two per-row errors comes first, float sums, the
first-read form of equal values, a semi-join's first match) then follow at most visible keys.

The profile says, per masked table, which access paths keep the read order off the masked columns
(`ScanPin`, reflected at start-up: `mcpkit.sql.scanpins`); this pass writes them into every
reference to such a table in the SQL mcpkit sends:

    MySQL/MariaDB  customers USE INDEX (`PRIMARY`, city_idx)   -- indexes over visible columns only
                   customers USE INDEX ()                      -- none: the clustered (PRIMARY) order
    SQLite         customers NOT INDEXED                       -- rowid order

The caller's own hints are refused before this pass (`plan._steers_the_plan`). PostgreSQL has no
hints: its calls turn index scans off in their transaction instead (`PostgresSession`).

A hint cannot reach inside a view: `masking.unpinned` (red team rth F5). A profile's entry with
`hinted=False` only describes a relation (a view, byte-exact columns) and gets no hint.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from mcpkit.sql.masking.taint import refuse_mask
from mcpkit.sql.profiles.scan_order import ScanPin, pin_key

__all__ = ["pin_scans"]

_CTE_NAMED_LIKE = (
    "Over a table with masked columns, a WITH query may not be named like that table on this database: "
    "rename the WITH query."
)


def _hint(pin: ScanPin) -> exp.IndexTableHint:
    names = [exp.to_identifier(name, quoted=True) for name in pin.indexes]
    return exp.IndexTableHint(this="USE", expressions=names)


def _reads_the_table(table: exp.Table, withs: list[exp.With]) -> bool:
    """Whether `table`, named like a CTE, reads the table (else the CTE), as MariaDB scopes it: in
    the one non-recursive WITH of the query, the CTE's own body and the bodies before it read the
    table, the bodies after it and the query the WITH belongs to read the CTE, a reference outside
    that query the table (measured on 10.11). Anything else is refused (review R9): a nested WITH's
    body read the table though an enclosing WITH named it, `WITH RECURSIVE` reads itself, and a name
    spelled in another case is left to the server's case rules."""
    names = [c.alias_or_name for c in withs[0].expressions] if len(withs) == 1 else []
    if table.name not in names or withs[0].args.get("recursive"):
        refuse_mask(f"CTE named like pinned table {table.name}", message=_CTE_NAMED_LIKE)
    with_ = withs[0]
    body = table.find_ancestor(exp.CTE)
    if body is not None and body.parent is with_:
        return with_.expressions.index(body) <= names.index(table.name)
    scope: exp.Expr | None = table
    while scope is not None and scope is not with_.parent:
        scope = scope.parent
    return scope is None


def pin_scans(tree: exp.Expr, pins: Mapping[str, ScanPin], resolve: object = None) -> bool:
    """Add the pin of each referenced masked table, in place; whether any was added.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT id FROM shop.c JOIN shop.d ON c.id = d.id", read="mysql")
    >>> pin_scans(tree, {"shop.c": ScanPin(("PRIMARY",)), "shop.d": ScanPin()})
    True
    >>> tree.sql("mysql")
    'SELECT id FROM shop.c USE INDEX (`PRIMARY`) JOIN shop.d USE INDEX () ON c.id = d.id'
    >>> tree = sqlglot.parse_one("SELECT id FROM c", read="sqlite")
    >>> pin_scans(tree, {".c": ScanPin(not_indexed=True)}), tree.sql("sqlite")
    (True, 'SELECT id FROM c NOT INDEXED')

    Args:
        tree: The tree to send (tables as written; `resolve` says where an unqualified one is).
        pins: `pin_key` -> its pin.
        resolve: `KnownSchema.resolve`-like: the schema an unqualified table resolves in.
    """
    if not pins:
        return False
    ctes = {c.alias_or_name.casefold() for c in tree.find_all(exp.CTE)}
    withs = list(tree.find_all(exp.With))
    added = False
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier) or isinstance(table.parent, exp.JoinHint):
            continue
        if table.arg_key == "indexed":
            continue  # an index name (SQLite INDEXED BY)
        schema = table.db or (resolve(table) if callable(resolve) else None)
        pin = pins.get(pin_key(schema, table.name))
        if pin is None or not pin.hinted:
            continue
        named_like = pin.indexes and not table.db and table.name.casefold() in ctes
        # a named index fails on a CTE; `NOT INDEXED` and `USE INDEX ()` suit both (red team rte F1)
        if named_like and not _reads_the_table(table, withs):
            continue
        if pin.not_indexed:  # SQLite: NOT INDEXED, or INDEXED BY a WITHOUT ROWID table's key (rtL F2)
            table.set("indexed", exp.Table(this=exp.to_identifier(pin.indexes[0])) if pin.indexes else False)
        else:
            table.set("hints", [_hint(pin)])
        added = True
    return added
