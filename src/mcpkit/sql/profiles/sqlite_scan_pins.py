"""Where SQLite's read order may follow a masked column, and how calls keep it off one.

SQLite reads a table in rowid order, or along an index it picks (a covering one for a query that
needs only its columns). A masked table with an index over a masked column (a key column, an
expression or a partial index's WHERE naming one) is sent `NOT INDEXED` (`masking.scan_pins`):
rowid order. NOT INDEXED takes every index away, also those of visible columns; one over visible
columns only keeps the table indexed. Where the stored order itself follows a masked column (a
WITHOUT ROWID table keyed on one, an INTEGER PRIMARY KEY that is masked: the rowid) no hint helps:
a start-up finding, `--allow clustered-order:T`.

A WITHOUT ROWID table has no rowid order: SQLite 3.40 still scans a covering index over a masked
column under `NOT INDEXED` (red team rtL F2), so such a table is sent `INDEXED BY` its primary key's
index (`ScanPin(indexes=(pk,), not_indexed=True)`): its stored order. A virtual table or a view has
no index of its own and no pin (rtI L3: `PRAGMA table_info` of an FTS5 table the masks withhold
failed, and `serve --mask` stopped as if it could not connect).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.scan_order import ScanPin, pin_key

__all__ = ["sqlite_scan_pins"]

_SQL = "SELECT sql FROM sqlite_master WHERE name = :name COLLATE NOCASE"
_STORED = "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = :name COLLATE NOCASE"
_WITHOUT_ROWID = "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = :name COLLATE NOCASE"
# SQLite's names: "quoted" (a doubled quote inside), [bracketed], `backquoted`, bare words; a 'string' may
# stand for a name too (red team rte F4: `lower("e-mail")` was read as the words e and mail)
_NAMES = re.compile(
    r'"((?:[^"]|"")*)"|\[([^\]]*)\]|`((?:[^`]|``)*)`|\'((?:[^\']|\'\')*)\'|([A-Za-z0-9_$\u0080-\uffff]+)'
)


def _names(sql: str) -> set[str]:
    """Every name (or string) an index's CREATE text may read a column through, case-folded."""
    found = set()
    for match in _NAMES.finditer(sql):
        quoted, bracketed, backquoted, string, word = match.groups()
        for name, quote in ((quoted, '"'), (backquoted, "`"), (string, "'")):
            if name is not None:
                found.add(name.replace(quote * 2, quote).casefold())
        found.update(n.casefold() for n in (bracketed, word) if n is not None)
    return found


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _reads_masked(conn: Connection, index: str, wanted: set[str]) -> bool:
    keys = conn.exec_driver_sql(f"PRAGMA index_xinfo({_quote(index)})").all()
    if any(k[2] is not None and str(k[2]).casefold() in wanted for k in keys if int(k[1]) >= 0):
        return True
    sql = str(conn.execute(text(_SQL), {"name": index}).scalar() or "")
    return bool(wanted & _names(sql))  # the whole text: a name may hold "(" (the index's own name counts too)


def _stored_in_masked_order(conn: Connection, table: str, wanted: set[str]) -> bool:
    sql = str(conn.execute(text(_SQL), {"name": table}).scalar() or "")
    info = conn.exec_driver_sql(f"PRAGMA table_info({_quote(table)})").all()
    keys = [(str(r[1]), str(r[2] or "")) for r in sorted(info, key=lambda r: int(r[5])) if int(r[5]) > 0]
    if re.search(r"\bWITHOUT\s+ROWID\b", sql, re.IGNORECASE):
        return any(name.casefold() in wanted for name, _ in keys)
    rowid = len(keys) == 1 and keys[0][1].upper() == "INTEGER"  # the rowid's alias
    return rowid and keys[0][0].casefold() in wanted


def sqlite_scan_pins(
    conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None = None
) -> tuple[dict[str, ScanPin], list[Finding]]:
    """`NOT INDEXED` for each masked table with an index over a masked column; findings for a table
    stored in a masked column's order."""
    pins: dict[str, ScanPin] = {}
    findings: list[Finding] = []
    for table, columns in sorted(masked.items()):
        wanted = {c.casefold() for c in columns}
        if not conn.execute(text(_STORED), {"name": table}).scalar():
            continue  # a virtual table (withheld whole when over a masked column) or a view
        if _stored_in_masked_order(conn, table, wanted):
            findings.append(
                Finding(
                    "clustered-masked",
                    f"table {table} is stored in the order of a masked column (its INTEGER PRIMARY KEY or "
                    "WITHOUT ROWID key), so every read of it follows that column's order",
                    f"key {table} on a visible column",
                    f"clustered-order:{table}",
                )
            )
        listed = conn.exec_driver_sql(f"PRAGMA index_list({_quote(table)})").all()
        if any(_reads_masked(conn, str(r[1]), wanted) for r in listed):
            clustered = conn.execute(text(_WITHOUT_ROWID), {"name": table}).scalar()
            primary = tuple(str(r[1]) for r in listed if clustered and str(r[3]) == "pk")[:1]
            pins[pin_key(None, table)] = pins[pin_key("main", table)] = ScanPin(primary, not_indexed=True)
    return pins, findings
