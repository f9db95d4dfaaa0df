"""SQLite: describe with `LIMIT 0`; types are per cell, so every column is clipped by `typeof()`."""

from __future__ import annotations

from typing import Any, Final

from sqlglot import exp

from mcpkit.sql.clipping import CellBudget, ClipPlan, WireColumn, text_chars, value_or_size

__all__ = ["FUNCTIONS", "describe", "wrap"]

# What the wrapper itself calls: the authorizer admits these whatever the operator's function list.
FUNCTIONS: Final = frozenset({"typeof", "substr", "length"})


def describe(dbapi: Any, sql: str, tree: exp.Expr | None = None) -> list[WireColumn]:
    """The result columns of `sql`, from the same query with `LIMIT 0` (SQLite stops at once)."""
    cur = dbapi.cursor()
    try:
        cur.execute(f"SELECT * FROM ({sql}) LIMIT 0")
        description = cur.description or ()
    finally:
        cur.close()
    names: list[str] = []
    for col in description:  # SQLite names a repeated column `id:1` in a subquery; show it as written
        name = str(col[0])
        base, colon, digits = name.rpartition(":")
        names.append(base if colon and digits.isdigit() and base in names else name)
    return [WireColumn(name, None, "other") for name in names]


def wrap(sql: str, columns: list[WireColumn], rows: int, budget: CellBudget) -> ClipPlan:
    """`WITH q(c1, ...) AS (<sql>) SELECT <value or NULL>, <size of a blob> ... FROM q`."""
    chars = text_chars(budget.cell_bytes(rows, len(columns)))
    parts: list[str] = []
    for i in range(len(columns)):
        c = f"q.c{i}"
        parts.append(
            f"CASE typeof({c}) WHEN 'blob' THEN NULL WHEN 'text' THEN substr({c}, 1, {chars}) ELSE {c} END"
        )
        parts.append(f"CASE typeof({c}) WHEN 'blob' THEN length({c}) END")
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    text = f"WITH q({names}) AS ({sql}) SELECT {', '.join(parts)} FROM q"
    return ClipPlan(text, tuple(columns), tuple(2 for _ in columns), tuple(value_or_size for _ in columns))
