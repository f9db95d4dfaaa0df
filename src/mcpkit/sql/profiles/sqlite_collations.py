"""The stored forms of SQLite columns for masking: declared collations and typeless columns (rth F4).

SQLAlchemy reflects `name TEXT COLLATE NOCASE` as TEXT and a column with no declared type (or a
view's computed column) as TEXT too; masking then took `min(name)` or `GROUP BY name` for a column
whose equal values print alike, while 'b' = 'B' under NOCASE, 'b' = 'b ' under RTRIM, and a typeless
column keeps 1 and 1.0 (equal) as written: the first scanned one was answered. Here each column's type
text gets its collation (` COLLATE NOCASE`) from the stored CREATE TABLE, or for a view from its
SELECT (an explicit COLLATE, or the column it copies); a column SQLite declares no type for is BLOB
(its affinity: values kept as written), which `masking.alike` does not take as printing one way.

SQLite itself is asked too (red team rtL F1: a CREATE TABLE sqlglot cannot parse, `WITHOUT ROWID`,
`ON CONFLICT`, a type of many words, came back all BINARY): a UNION whose left-most column is the
column, over no row of it, dedups 'a'/'A' and 'a'/'a ' under the column's own collation (SQLite
takes a compound's collation from its left-most column). A column either way finds not BINARY is
not BINARY; a probe that fails is not traced.
"""

from __future__ import annotations

import logging
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp
from sqlglot.errors import SqlglotError

_SQLGLOT_LOG: Final = logging.getLogger("sqlglot")

__all__ = ["stored_forms"]

_BINARY: Final = "BINARY"
_UNTRACED: Final = "UNTRACED"


def _collate_name(node: exp.Expr) -> str:
    name = node.expression
    return (name.name if isinstance(name, exp.Identifier | exp.Column | exp.Var) else name.sql()).upper()


class _Quiet(logging.Filter):
    """Drops sqlglot's note that it read a statement as a Command: such a DDL (`WITHOUT ROWID`) is
    asked of SQLite instead, and the note would name the operator's tables in the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "unsupported syntax" not in record.getMessage()


def _parsed(sql: str | None) -> exp.Expr | None:
    if not sql:
        return None
    quiet = _Quiet()
    _SQLGLOT_LOG.addFilter(quiet)
    try:
        return sqlglot.parse_one(sql, read="sqlite")
    except (SqlglotError, ValueError):
        return None
    finally:
        _SQLGLOT_LOG.removeFilter(quiet)


def _table_collations(tree: exp.Expr) -> dict[str, str]:
    out = {}
    schema = tree.this if isinstance(tree, exp.Create) else None
    for col in schema.expressions if isinstance(schema, exp.Schema) else []:
        if not isinstance(col, exp.ColumnDef):
            continue
        for constraint in col.args.get("constraints") or []:
            kind = constraint.args.get("kind")
            if isinstance(kind, exp.CollateColumnConstraint):
                out[col.name.casefold()] = kind.this.name.upper()
    return out


def _expr_collation(node: exp.Expr, tables: dict[str, str], derived: bool, seen: _Seen) -> str:
    """The collation of a view's output: an explicit COLLATE, or the table column it copies; a column
    of a subquery, a CTE or a table function is not traced (`_UNTRACED`: taken as not BINARY)."""
    while isinstance(node, exp.Alias | exp.Paren):
        node = node.this
    if isinstance(node, exp.Collate):
        return _collate_name(node)
    if not isinstance(node, exp.Column):
        return _BINARY
    if node.table and node.table not in tables:
        return _UNTRACED
    names = [tables[node.table]] if node.table else sorted(set(tables.values()))
    found = [seen.of(t).get(node.name.casefold(), _BINARY) for t in names]
    default = _UNTRACED if derived and not node.table else _BINARY
    return next((c for c in found if c != _BINARY), default)


def _view_collations(tree: exp.Expr, names: list[str], seen: _Seen) -> list[str]:
    select = tree.expression if isinstance(tree, exp.Create) else None
    ctes = {c.alias_or_name.casefold() for c in tree.find_all(exp.CTE)}
    while isinstance(select, exp.SetOperation | exp.Subquery):
        select = select.this  # a compound's columns are its left-most SELECT's
    if not isinstance(select, exp.Select):
        return [_UNTRACED] * len(names)
    sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
    found = [s.this for s in sources if s is not None]
    plain = [t for t in found if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier)]
    plain = [t for t in plain if t.name.casefold() not in ctes]
    tables = {t.alias_or_name: t.name for t in plain}
    derived = len(plain) != len(found)
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in select.expressions):
        return [_expr_collation(exp.column(n), tables, derived, seen) for n in names]
    return [_expr_collation(item, tables, derived, seen) for item in select.expressions]


_PAIRS: Final = (("'a'", "'A'", "NOCASE"), ("'a'", "'a '", "RTRIM"))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _probe_sql(table: str, column: str) -> str:
    """Per pair of values a collation tells apart: 1 where the column's collation takes them as equal."""
    own = f"SELECT {_quoted(column)} FROM {_quoted(table)} WHERE 0"
    return ", ".join(
        f"(SELECT count(*) = 1 FROM ({own} UNION SELECT {a} UNION SELECT {b}))" for a, b, _ in _PAIRS
    )


def _probed(conn: Connection, table: str, names: list[str]) -> dict[str, str]:
    """Column (casefolded) -> the collation SQLite compares it with, as seen (`_UNTRACED` where the
    probe fails: an unknown collation, a withheld or broken relation)."""
    out = {}
    for name in names:
        try:
            row = conn.exec_driver_sql("SELECT " + _probe_sql(table, name)).first()
        except Exception:  # any failure of the probe: not traced, taken as not BINARY
            out[name.casefold()] = _UNTRACED
            continue
        equal = [pair[2] for pair, same in zip(_PAIRS, row or (), strict=False) if same]
        out[name.casefold()] = equal[0] if equal else _BINARY if row is not None else _UNTRACED
    return out


def _merged(declared: dict[str, str], probed: dict[str, str]) -> dict[str, str]:
    out = dict(declared)
    for name, collation in probed.items():
        if collation != _BINARY and out.get(name, _BINARY) == _BINARY:
            out[name] = collation
    return out


class _Seen:
    """The tables and views already read while tracing one view (a view over views; bounded)."""

    def __init__(self, conn: Connection, names: frozenset[str]) -> None:
        self.conn, self.names = conn, names

    def of(self, table: str) -> dict[str, str]:
        return collations(self.conn, table, self.names)


def collations(conn: Connection, table: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
    """Column (casefolded) -> its collation (BINARY when none is declared) of a table or view."""
    if table.casefold() in seen or len(seen) > 16:
        return {}  # a cycle or a deep chain: its columns are traced no further
    row = conn.execute(
        text(
            "SELECT type, sql FROM sqlite_master WHERE name = :n COLLATE NOCASE AND type IN ('table', 'view')"
        ),
        {"n": table},
    ).first()
    if row is None:
        return {}
    names = [r[1] for r in conn.execute(text("SELECT * FROM pragma_table_xinfo(:n)"), {"n": table})]
    probed = _probed(conn, str(table), [str(n) for n in names])
    tree = _parsed(row[1])
    if tree is None:
        return probed
    if row[0] == "table":
        return _merged(_table_collations(tree), probed)
    found = _view_collations(tree, names, _Seen(conn, seen | {table.casefold()}))
    return _merged({n.casefold(): c for n, c in zip(names, found, strict=False)}, probed)


def stored_forms(conn: Connection, table: str, types: dict[str, str]) -> dict[str, str]:
    """`types` (column -> reflected type text) with each column's collation other than BINARY
    appended (`TEXT COLLATE NOCASE`) and BLOB for a column declared with no type."""
    declared = {r[1]: r[2] for r in conn.execute(text("SELECT * FROM pragma_table_xinfo(:n)"), {"n": table})}
    found = collations(conn, table)
    out = {}
    for name, type_text in types.items():
        form = type_text if (declared.get(name) or "").strip() else "BLOB"
        collation = found.get(name.casefold(), _BINARY)
        out[name] = form if collation == _BINARY else f"{form} COLLATE {collation}"
    return out
