"""PostgreSQL: describe with `LIMIT 0` (the executor returns before reading), clip in a derived table."""

from __future__ import annotations

from typing import Any

from mcpkit.sql.clipping import (
    CAP,
    CellBudget,
    ClipPlan,
    WireColumn,
    keep,
    size_only,
    text_chars,
    text_or_clipped,
)

__all__ = ["describe", "wrap"]

_TYPES = "SELECT oid::int, typname, typlen, typcategory FROM pg_catalog.pg_type WHERE oid = ANY(%s)"
_FIRST_USER_OID = 16384  # FirstNormalObjectId: OIDs below it are built in and never change
_BUILTIN: dict[int, tuple[str, int, str]] = {}  # built-in type OID -> (typname, typlen, typcategory)


def describe(dbapi: Any, sql: str) -> list[WireColumn]:
    """The result columns of `sql`, from the same query with `LIMIT 0` (the executor stops at once).

    It goes through psycopg's ordinary cursor, so the call's statement_timeout and the watchdog's
    cancel apply to it like to the query itself.
    """
    capped = CAP.search(sql)
    probe = sql[: capped.start()] + "LIMIT 0" if capped else f"SELECT * FROM ({sql}) AS q LIMIT 0"
    with dbapi.cursor() as cur:
        cur.execute(probe, prepare=False)
        description = list(cur.description or ())
        oids = [int(d.type_code) for d in description]
        types = {o: _BUILTIN[o] for o in oids if o in _BUILTIN}
        unknown = sorted(set(oids) - set(types))
        if unknown:  # extension and user types are looked up every time (they can be re-created)
            cur.execute(_TYPES, [unknown])
            for o, n, length, cat in cur.fetchall():
                types[int(o)] = (str(n), int(length), str(cat))
                if int(o) < _FIRST_USER_OID:
                    _BUILTIN[int(o)] = types[int(o)]
    out = []
    for col, oid in zip(description, oids, strict=True):
        typname, length, category = types.get(oid, (None, -1, "X"))
        if length > 0:
            kind = "fixed"
        elif typname == "bytea":
            kind = "binary"
        elif category == "S":
            kind = "text"
        else:
            kind = "other"
        out.append(WireColumn(str(col.name), typname, kind))  # type: ignore[arg-type]
    return out


def wrap(sql: str, columns: list[WireColumn], rows: int, budget: CellBudget) -> ClipPlan:
    """`SELECT <clipped cells> FROM (<sql>) AS q(c1, ...)`: PostgreSQL keeps a subquery's order."""
    cell = budget.cell_bytes(rows, len(columns))
    chars = text_chars(cell)
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    parts: list[str] = []
    widths: list[int] = []
    merges: list[Any] = []
    for i, col in enumerate(columns):
        c = f"q.c{i}"
        if col.kind == "fixed":
            parts.append(c)
            widths.append(1)
            merges.append(keep)
        elif col.kind == "binary":
            parts.append(f"octet_length({c})")
            widths.append(1)
            merges.append(size_only)
        elif col.kind == "text":
            parts.append(f"left({c}::text, {chars})")
            widths.append(1)
            merges.append(keep)
        else:
            parts.append(f"CASE WHEN pg_column_size({c}) <= {cell} THEN {c} END")
            parts.append(f"CASE WHEN pg_column_size({c}) > {cell} THEN left({c}::text, {chars}) END")
            widths.append(2)
            merges.append(text_or_clipped)
    text = f"SELECT {', '.join(parts) or '*'} FROM ({sql}) AS q({names})"
    return ClipPlan(text, tuple(columns), tuple(widths), tuple(merges))
