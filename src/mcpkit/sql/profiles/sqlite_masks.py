"""SQLite masking at the engine: which tables and columns the authorizer withholds, and why.

A masked column reads as NULL; a table that holds masked text under another name (the shadow tables
of a virtual table, a full-text index over a view of a masked table, a generated column computed
from a masked one) is withheld too, and so is a view whose rows depend on a masked value
(`sqlite_views`; a view column computed from one is masked by name).
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp
from sqlglot.errors import SqlglotError

from mcpkit.sql.profiles.sqlite_views import view_masks

__all__ = [
    "CATALOG_PREFIXES",
    "NEVER_THROUGH_VIEWS",
    "STORAGE_TABLES",
    "Withheld",
    "exact_ties",
    "expression_index_hints",
    "generated_columns",
    "trigger_hints",
    "views_over",
    "withheld_for",
]

log = logging.getLogger("mcpkit.sql")

_CONTENT: Final = re.compile(r"\bcontent\s*=\s*['\"`\[]?([^'\"`\],)\s]+)", re.IGNORECASE)


NEVER_THROUGH_VIEWS: Final = frozenset({"pragma_database_list", "pragma_data_version"})
"""Never readable, even through a view: the file's path, other connections' commits."""
STORAGE_TABLES: Final = frozenset({"dbstat", "sqlite_dbpage"})
"""With masks, never readable: each page's record sizes, a masked value's length (red team rtI F1:
`dbstat('main')`, a table-valued call the catalog check did not take for the name, sized them), or
the raw pages (`sqlite_dbpage`, in builds that have it)."""
CATALOG_PREFIXES: Final = ("sqlite_", "pragma_")
"""With masks, no view may read a catalog, statistics or pragma table: calls are refused them by
name, and a view would hand them over (`sqlite_stat4` holds index keys: masked values)."""


@dataclass(frozen=True)
class Withheld:
    """What the authorizer keeps from every statement: masked columns, and whole tables."""

    columns: frozenset[tuple[str, str]] = frozenset()  # (table, column), case-folded: read as NULL
    tables: frozenset[str] = frozenset()  # case-folded: any read refused (shadow tables, views)
    virtual: frozenset[str] = frozenset()  # case-folded: virtual tables over masked columns

    @property
    def masks(self) -> bool:
        """Whether any column is masked (then no view reads a catalog)."""
        return bool(self.columns or self.tables)

    def read(self, table: str | None, column: str | None, via: str | None = None) -> int:
        """The authorizer's answer to SQLITE_READ of `table.column` (`via`: the inner-most view
        or trigger that reads it, None at the top level)."""
        name = (table or "").casefold()
        if name in self.tables or (via or "").casefold() in self.tables:
            return sqlite3.SQLITE_DENY
        if self.masks and name in STORAGE_TABLES:
            return sqlite3.SQLITE_DENY
        if via and (name in NEVER_THROUGH_VIEWS or (self.masks and name.startswith(CATALOG_PREFIXES))):
            # Admission refuses these by name in the call's text; an operator's view hides the name
            # (red team rt19lite F6: a view over pragma_database_list answered the file's path, one
            # over sqlite_stat1 the masked column's distinct count, one over sqlite_master every
            # CREATE statement's literals).
            return sqlite3.SQLITE_DENY
        if (name, (column or "").casefold()) in self.columns:
            # SQLite compiles the statement with NULL in place of the column: no clause, function
            # or virtual table (an external-content FTS5 reads its content table) sees the value.
            return sqlite3.SQLITE_IGNORE
        return sqlite3.SQLITE_OK


def withheld_for(conn: Connection, masked: Mapping[str, frozenset[str]]) -> Withheld:
    """The masked columns, plus the virtual tables over them: their masked columns and shadow tables.

    A virtual table is over a masked column when the policy masks one of its own columns, or when
    its `content=` table (FTS5, FTS4) has masked columns; its shadow tables (`_content`, `_data`,
    `_idx`, `_docsize`, `_config`, R*Tree `_node`, ...) hold copies or tokens of the text, so every
    read of them is denied, which also refuses MATCH on it.
    """
    folded = {t.casefold(): {c.casefold() for c in cols} for t, cols in masked.items() if cols}
    views = views_over(conn, set(folded))
    through = view_masks(conn, masked, views)
    for view, cols in through.columns.items():
        folded[view] = folded.get(view, set()) | cols
    columns = {(t, c) for t, cols in folded.items() for c in cols}
    over: set[str] = set()
    for name, sql in conn.exec_driver_sql(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    ):
        vtab, content = str(name).casefold(), _CONTENT.search(str(sql or ""))
        source = folded.get(content.group(1).casefold(), set()) if content else set()
        # content= a view over a masked table: the index holds its text (refused whole, below).
        over_view = content is not None and content.group(1).casefold() in views
        if vtab in folded or source or over_view:
            over.add(vtab)
            columns |= {(vtab, c) for c in source}
    shadows = {
        str(row[1]).casefold() for row in conn.exec_driver_sql("PRAGMA table_list") if str(row[2]) == "shadow"
    }
    tables = {s for s in shadows if any(s.startswith(f"{v}_") for v in over)} | through.withheld
    tables |= STORAGE_TABLES if columns else set()  # named as a table or called: refused before it runs
    for vtab in sorted(over):
        log.info(
            "masks: SQLite virtual table %s is built over masked columns; it and its shadow tables "
            "(%s) cannot be opened by the calls (refused before they run)",
            vtab,
            ", ".join(sorted(s for s in tables if s.startswith(f"{vtab}_"))) or "none",
        )
    return Withheld(frozenset(columns), frozenset(tables), frozenset(over))


def generated_columns(conn: Connection, table: str, masked: frozenset[str]) -> frozenset[str]:
    """Generated columns of `table` computed (directly or through another) from a masked column.

    SQLite's authorizer reports a read of the generated column, not of the columns its expression
    reads. The expressions come from the stored CREATE TABLE; one that cannot be parsed counts as
    reading every column.
    """
    found = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    row = found.first()
    hidden = {
        str(r[1]).casefold()
        for r in conn.exec_driver_sql(f"PRAGMA table_xinfo({_sqlite_quote(table)})")
        if int(r[6]) in (2, 3)  # 2: VIRTUAL, 3: STORED generated column
    }
    if not hidden:
        return frozenset()
    reads: dict[str, set[str]] = {}
    try:
        tree = sqlglot.parse_one(str(row[0] if row else ""), read="sqlite")
        for column in tree.find_all(exp.ColumnDef):
            for constraint in column.constraints:
                kind = constraint.args.get("kind")
                if isinstance(kind, exp.ComputedColumnConstraint):
                    reads[column.name.casefold()] = {c.name.casefold() for c in kind.find_all(exp.Column)}
    except SqlglotError:
        reads = {}
    if set(reads) != hidden:
        return frozenset(hidden)
    tainted = {c.casefold() for c in masked}
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, uses in reads.items():
            if name not in out and uses & (tainted | out):
                out.add(name)
                changed = True
    return frozenset(out)


_TRIGGERS: Final = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :table COLLATE NOCASE"
    " ORDER BY name"
)
_TIMING: Final = re.compile(r"\b(BEFORE|AFTER|INSTEAD\s+OF)\b", re.IGNORECASE)
_BODY: Final = re.compile(r"\bBEGIN\b(.*)", re.IGNORECASE | re.DOTALL)


def trigger_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """One warning per trigger on a table with masked columns (every SQLite trigger is a row
    trigger; the timing is read from its text, BEFORE when it says none, and its body after BEGIN)."""
    from mcpkit.sql.profiles.triggers import trigger_hint

    out = []
    for table in sorted(masked):
        for name, sql in conn.execute(text(_TRIGGERS), {"table": table}).all():
            header, body = str(sql or ""), _BODY.search(str(sql or ""))
            timing = _TIMING.search(header[: body.start()] if body else header)
            when = " ".join(timing[1].upper().split()) if timing else "BEFORE"
            out.append(trigger_hint(table, str(name), when, body[1] if body else None))
    return out


_INDEXES: Final = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :table COLLATE NOCASE"
    " AND sql IS NOT NULL ORDER BY name"
)
_KEYS: Final = re.compile(r"\bON\s+.*?\((.*)\)", re.IGNORECASE | re.DOTALL)


def expression_index_hints(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
    """Indexes with an expression key naming a masked column: SQLAlchemy's inspector skips every
    expression index (red team rt22 F2: `lower(email)` went unnamed). PRAGMA index_xinfo marks an
    expression key with cid -2; its text is in the index's CREATE INDEX (conservative: a mention
    anywhere in the key list or WHERE counts)."""
    from mcpkit.sql.profiles.scan_order import hint

    out = []
    for table, columns in sorted(masked.items()):
        wanted = {c.casefold() for c in columns}
        for name, sql in conn.execute(text(_INDEXES), {"table": table}).all():
            keys = conn.exec_driver_sql(f"PRAGMA index_xinfo({_sqlite_quote(str(name))})").all()
            found = _KEYS.search(str(sql))
            if found is None or not any(int(k[1]) == -2 for k in keys):
                continue
            named = {w.casefold() for w in re.findall(r"[A-Za-z0-9_$\u0080-\uffff]+", found[1])}
            for column in sorted(wanted & named):
                out.append(hint(table, column, f"expression index {name}"))
    return out


def _sqlite_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def views_over(conn: Connection, tables: set[str]) -> set[str]:
    """Views whose definition names one of `tables` (or such a view), or a catalog, statistics or
    pragma table (with masks: the analysis withholds them), case-folded; conservative: a mention
    anywhere in the stored SQL counts."""
    defined = {
        str(n).casefold(): str(q or "").casefold()
        for n, q in conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'view'")
    }
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, sql in defined.items():
            words = set(re.findall(r"[a-z0-9_$\u0080-\uffff]+", sql))
            catalogs = tables and any(w.startswith(CATALOG_PREFIXES) for w in words)
            if name not in out and (words & (tables | out) or catalogs):
                out.add(name)
                changed = True
    return out


def exact_ties(node: exp.Expr) -> list[exp.Expr]:
    """BINARY collation (NOCASE ignores case), the storage class (1 = 1.0), and the sign of zero:
    -0.0 = 0.0 and prints "0.0" in SQL but reaches the client as -0.0 (atan2(x, -1) is -pi for
    -0.0 and pi for 0.0)."""
    return [
        exp.Collate(this=node.copy(), expression=exp.var("BINARY")),
        exp.Anonymous(this="typeof", expressions=[node.copy()]),
        exp.Anonymous(this="atan2", expressions=[node.copy(), exp.Literal.number(-1)]),
    ]
