"""The stored forms of SQLite columns for masking: declared collations and typeless columns (rth F4).

SQLAlchemy reflects `name TEXT COLLATE NOCASE` as TEXT and a column with no declared type (or a
view's computed column) as TEXT too; masking then took `min(name)` or `GROUP BY name` for a column
whose equal values print alike, while 'b' = 'B' under NOCASE, 'b' = 'b ' under RTRIM, and a typeless
column keeps 1 and 1.0 (equal) as written: the first scanned one was answered. Here each column's type
text gets its collation (` COLLATE NOCASE`) from the stored CREATE TABLE, or for a view from its
SELECT (an explicit COLLATE, or the column it copies); a column SQLite declares no type for is BLOB
(its affinity: values kept as written), which `masking.alike` does not take as printing one way.
"""

from __future__ import annotations

from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot import exp
from sqlglot.errors import SqlglotError

__all__ = ["stored_forms"]

_BINARY: Final = "BINARY"


def _collate_name(node: exp.Expr) -> str:
    name = node.expression
    return (name.name if isinstance(name, exp.Identifier | exp.Column | exp.Var) else name.sql()).upper()


def _parsed(sql: str | None) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(sql, read="sqlite") if sql else None
    except (SqlglotError, ValueError):
        return None


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


def _expr_collation(node: exp.Expr, sources: list[str], seen: frozenset[str], conn: Connection) -> str:
    while isinstance(node, exp.Alias | exp.Paren):
        node = node.this
    if isinstance(node, exp.Collate):
        return _collate_name(node)
    if not isinstance(node, exp.Column):
        return _BINARY
    # the column it copies: any table it may name with a collation counts (a join left unresolved)
    names = [node.table] if node.table else sources
    found = [collations(conn, t, seen).get(node.name.casefold(), _BINARY) for t in names]
    return next((c for c in found if c != _BINARY), _BINARY)


def _view_collations(tree: exp.Expr, seen: frozenset[str], conn: Connection) -> list[str]:
    select = tree.expression if isinstance(tree, exp.Create) else None
    while isinstance(select, exp.SetOperation | exp.Subquery):
        select = select.this  # a compound's columns are its left-most SELECT's
    if not isinstance(select, exp.Select):
        return []
    own = [t for t in select.find_all(exp.Table) if t.find_ancestor(exp.Select) is select]
    tables = {t.alias_or_name: t.name for t in own}
    out = []
    for item in select.expressions:
        inner = item.unalias() if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.table in tables:
            inner = exp.column(inner.name, table=tables[inner.table])
        out.append(_expr_collation(inner, sorted(set(tables.values())), seen, conn))
    return out


def collations(conn: Connection, table: str, seen: frozenset[str] = frozenset()) -> dict[str, str]:
    """Column (casefolded) -> its collation (BINARY when none is declared) of a table or view."""
    if table.casefold() in seen or len(seen) > 16:
        return {}
    row = conn.execute(
        text(
            "SELECT type, sql FROM sqlite_master WHERE name = :n COLLATE NOCASE AND type IN ('table', 'view')"
        ),
        {"n": table},
    ).first()
    tree = _parsed(row[1]) if row is not None else None
    if tree is None or row is None:
        return {}
    if row[0] == "table":
        return _table_collations(tree)
    names = [r[1] for r in conn.execute(text("SELECT * FROM pragma_table_info(:n)"), {"n": table})]
    found = _view_collations(tree, seen | {table.casefold()}, conn)
    return {n.casefold(): c for n, c in zip(names, found, strict=False)}


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
