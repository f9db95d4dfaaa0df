"""PostgreSQL: describe through the extended protocol (parse, no execution), clip in a derived table."""

from __future__ import annotations

from typing import Any

from mcpkit.sql.clipping import CellBudget, ClipPlan, WireColumn, keep, size_only, text_chars, text_or_clipped

__all__ = ["describe", "wrap"]

_TYPES = "SELECT oid::int, typname, typlen, typcategory FROM pg_catalog.pg_type WHERE oid = ANY(%s)"


def describe(dbapi: Any, sql: str) -> list[WireColumn]:
    """The result columns of `sql`, from a Describe of the unnamed statement (nothing is executed)."""
    from psycopg import errors, pq

    conn = dbapi.pgconn
    prepared = conn.prepare(b"", sql.encode())
    if prepared.status != pq.ExecStatus.COMMAND_OK:
        raise _error(prepared, errors)
    described = conn.describe_prepared(b"")
    if described.status != pq.ExecStatus.COMMAND_OK:
        raise _error(described, errors)
    names = [(described.fname(i) or b"?").decode() for i in range(described.nfields)]
    oids = [int(described.ftype(i)) for i in range(described.nfields)]
    with dbapi.cursor() as cur:
        cur.execute(_TYPES, [sorted(set(oids))])
        types = {int(o): (str(n), int(length), str(cat)) for o, n, length, cat in cur.fetchall()}
    out = []
    for name, oid in zip(names, oids, strict=True):
        typname, length, category = types.get(oid, (None, -1, "X"))
        if length > 0:
            kind = "fixed"
        elif typname == "bytea":
            kind = "binary"
        elif category == "S":
            kind = "text"
        else:
            kind = "other"
        out.append(WireColumn(name, typname, kind))  # type: ignore[arg-type]
    return out


def _error(result: Any, errors: Any) -> Exception:
    from psycopg import pq

    state = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
    message = (result.error_message or b"").decode(errors="replace")
    cls = errors.lookup(state) if state else errors.DatabaseError
    return cls(message)  # type: ignore[no-any-return]


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
