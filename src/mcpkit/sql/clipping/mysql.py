"""MySQL and MariaDB: describe with `LIMIT 0` (the optimizer stops before the join), clip in a derived table.

The admitted SQL always ends with the row cap (`LIMIT n`, written by mcpkit's own generator), so
the describe step sends it with `LIMIT 0`: the result's names, duplicates included, without a run.
Columns are referenced by name from a derived table; duplicate names (which a derived table cannot
hold) go through a CTE column list instead (MariaDB then resolves a UNION's ORDER BY name against
that list, so a query with both fails in the database: refused, never unclipped).
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from sqlglot import exp

from mcpkit.sql.clipping import CAP, CellBudget, ClipPlan, WireColumn, keep, size_only, text_chars
from mcpkit.sql.profiles.mysql.temp_space import sized

__all__ = ["describe", "wrap"]

_BINARY_CHARSET: Final = 63
_VARIABLE: Final = frozenset(
    {"VARCHAR", "VAR_STRING", "STRING", "TINY_BLOB", "MEDIUM_BLOB", "LONG_BLOB", "BLOB", "JSON", "GEOMETRY",
     "ENUM", "SET"}
)  # fmt: skip


def describe(dbapi: Any, sql: str, tree: exp.Expr | None = None) -> list[WireColumn]:
    """The result columns of `sql`, from the same query with `LIMIT 0` (`tree`: its parse, if known)."""
    field_type = importlib.import_module("pymysql.constants.FIELD_TYPE")
    by_code = {v: k for k, v in vars(field_type).items() if k.isupper() and isinstance(v, int)}
    cur = dbapi.cursor()
    try:
        capped = CAP.search(sql)
        statement = sql[: capped.start()] + "LIMIT 0" if capped else f"SELECT * FROM ({sql}) AS q LIMIT 0"
        # MariaDB builds derived tables even under LIMIT 0: sized as the query itself is
        mariadb = "mariadb" in str(dbapi.get_server_info()).lower()
        cur.execute(sized(cur, statement, tree=tree) if mariadb else statement)
        result = getattr(cur, "_result", None)  # pymysql keeps the field packets (charset) there
        fields = list(result.fields or []) if result is not None else []
        description = cur.description or ()
    finally:
        cur.close()
    out = []
    for i, col in enumerate(description):
        name = by_code.get(col[1])
        charset = fields[i].charsetnr if i < len(fields) else None
        if name not in _VARIABLE:
            kind = "fixed"
        elif charset == _BINARY_CHARSET and name != "JSON":
            kind = "binary"
        else:
            kind = "text"
        out.append(WireColumn(str(col[0]), name, kind))  # type: ignore[arg-type]
    return out


def wrap(sql: str, columns: list[WireColumn], rows: int, budget: CellBudget) -> ClipPlan:
    """`WITH q(c1, ...) AS (<sql>) SELECT <clipped cells> FROM q`."""
    chars = text_chars(budget.cell_bytes(rows, len(columns)))
    parts: list[str] = []
    merges: list[Any] = []
    unique = len({c.name.lower() for c in columns}) == len(columns)
    for i, col in enumerate(columns):
        c = "q.`" + col.name.replace("`", "``") + "`" if unique else f"q.c{i}"
        if col.kind == "binary":
            parts.append(f"LENGTH({c})")
            merges.append(size_only)
        elif col.kind == "text":
            parts.append(f"LEFT({c}, {chars})")
            merges.append(keep)
        else:
            parts.append(c)
            merges.append(keep)
    if unique:
        text = f"SELECT {', '.join(parts)} FROM ({sql}) AS q"
    else:
        names = ", ".join(f"c{i}" for i in range(len(columns)))
        text = f"WITH q({names}) AS ({sql}) SELECT {', '.join(parts)} FROM q"
    return ClipPlan(text, tuple(columns), tuple(1 for _ in columns), tuple(merges))
