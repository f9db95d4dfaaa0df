"""PostgreSQL: describe with `LIMIT 0` (the executor returns before reading), clip in a derived table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import pq
from sqlglot import exp

from mcpkit.sql.clipping import (
    CAP,
    CellBudget,
    ClipPlan,
    StaleDescription,
    WireColumn,
    keep,
    size_only,
    text_chars,
    text_or_clipped,
)

__all__ = ["Described", "describe", "described", "run", "wrap"]

_TYPES = "SELECT oid::int, typname, typlen, typcategory FROM pg_catalog.pg_type WHERE oid = ANY(%s)"
_FIRST_USER_OID = 16384  # FirstNormalObjectId: OIDs below it are built in and never change
_BUILTIN: dict[int, tuple[str, int, str]] = {}  # built-in type OID -> (typname, typlen, typcategory)
_MAX_TYPLEN = 32767  # pg_type.typlen is an int2: no fixed-size value is larger


@dataclass(frozen=True)
class Described:
    """A describe's answer: the columns, and the type OIDs they were derived from."""

    columns: tuple[WireColumn, ...]
    oids: tuple[int, ...]


def _probe(sql: str) -> str:
    capped = CAP.search(sql)
    return sql[: capped.start()] + "LIMIT 0" if capped else f"SELECT * FROM ({sql}) AS q LIMIT 0"


def _send(cur: Any, sql: str, params: Any = None) -> None:
    """Queue one statement of a pipeline (extended protocol: one statement, never a second)."""
    cur.execute(sql, params, prepare=False)


def _columns(description: Any, types: dict[int, tuple[str, int, str]]) -> Described:
    out = []
    oids = tuple(int(d.type_code) for d in description)
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
    return Described(tuple(out), oids)


def _types(rows: Any, into: dict[int, tuple[str, int, str]]) -> None:
    for o, n, length, cat in rows:
        into[int(o)] = (str(n), int(length), str(cat))
        if int(o) < _FIRST_USER_OID:
            _BUILTIN[int(o)] = into[int(o)]


def described(dbapi: Any, sql: str, prelude: Sequence[str] = ()) -> Described:
    """The result columns of `sql`, from the same query with `LIMIT 0` (the executor stops at once).

    It goes through psycopg's ordinary cursor in pipeline mode (the extended protocol, which
    refuses a second statement), after `prelude` in the same round trip, so the call's
    statement_timeout and the watchdog's cancel apply to it like to the query itself. Extension
    and user types are looked up every time (they can be re-created); built-in ones once per process.
    """
    with dbapi.cursor() as head, dbapi.cursor() as cur:
        with dbapi.pipeline():
            for statement in prelude:
                _send(head, statement)
            _send(cur, _probe(sql))
        description = list(cur.description or ())
        oids = [int(d.type_code) for d in description]
        types = {o: _BUILTIN[o] for o in oids if o in _BUILTIN}
        unknown = sorted(set(oids) - set(types))
        if unknown:
            cur.execute(_TYPES, [unknown])
            _types(cur.fetchall(), types)
    return _columns(description, types)


def describe(dbapi: Any, sql: str, tree: exp.Expr | None = None) -> list[WireColumn]:
    """The result columns of `sql` (`described`)."""
    return list(described(dbapi, sql).columns)


def run(
    dbapi: Any, sql: str, rows: int, budget: CellBudget, known: Described | None, prelude: Sequence[str] = ()
) -> tuple[ClipPlan, list[Any], Described]:
    """Describe, wrap and run `sql` (at most `rows` wire rows), after `prelude` (the call's begin).

    With no `known`: the prelude and the describe in one round trip, the wrapped query in another.
    `known` is what an earlier call described for the same SQL on the same login and role. Then
    the prelude, the describe, a look-up of `known`'s non-built-in types and the query wrapped
    for `known` go in one pipeline (one round trip), and the rows are used only if this describe
    gives exactly `known`: then the wrap is the one a fresh describe would give, so a remembered
    description can never change an answer. Otherwise the query is wrapped for the fresh columns
    and run again (or, when the stale wrap failed and so aborted the transaction,
    `StaleDescription` asks for a new call). While it is checked, a column `known` says is
    fixed-size is sent only where it is at most the largest fixed size (32,767 bytes), so a column
    whose type changed since cannot bring a huge cell in the discarded rows. A failing prelude
    statement fails the call: in a pipeline the server skips everything after it.
    """
    if known is None:
        return _run(dbapi, sql, rows, budget, described(dbapi, sql, prelude))
    fit = budget.fit(rows, len(known.columns))  # a wide row: fewer rows, cut in the SQL sent
    plan = wrap(sql, list(known.columns), fit, budget, guard=True)
    user = sorted({o for o in known.oids if o not in _BUILTIN})
    with dbapi.cursor() as head, dbapi.cursor() as probe, dbapi.cursor() as cur:
        looked = dbapi.cursor() if user else None
        failure: Exception | None = None
        try:
            with dbapi.pipeline():
                for statement in prelude:
                    _send(head, statement)
                _send(probe, _probe(sql))
                if looked is not None:
                    _send(looked, _TYPES, [user])
                _send(cur, _limited(plan.sql, fit, rows))
        except Exception as exc:  # judged below: whether the wrap it ran was a stale one
            failure = exc
        fresh: Described | None = None
        if probe.pgresult is not None and probe.pgresult.status == pq.ExecStatus.TUPLES_OK:
            types = {o: _BUILTIN[o] for o in known.oids if o in _BUILTIN}
            result = looked.pgresult if looked is not None else None
            if looked is not None and result is not None and result.status == pq.ExecStatus.TUPLES_OK:
                _types(looked.fetchall(), types)
            description = probe.description or []
            if {int(d.type_code) for d in description} <= set(types):
                fresh = _columns(description, types)
        if looked is not None:
            looked.close()
        if fresh == known:
            if failure is not None:
                raise failure
            return plan, cur.fetchmany(fit), known
        if failure is not None:
            if fresh is None or getattr(failure, "sqlstate", None) is None:
                raise failure  # the prelude or the describe failed (or no database error): not stale
            raise StaleDescription from failure
    # The query's columns changed since (the transaction is intact): wrap it for the new ones.
    return _run(dbapi, sql, rows, budget, fresh if fresh is not None else described(dbapi, sql))


def _run(
    dbapi: Any, sql: str, rows: int, budget: CellBudget, fresh: Described
) -> tuple[ClipPlan, list[Any], Described]:
    fit = budget.fit(rows, len(fresh.columns))  # a wide row: fewer rows, cut in the SQL sent
    plan = wrap(sql, list(fresh.columns), fit, budget)
    with dbapi.cursor() as cur:
        with dbapi.pipeline():
            _send(cur, _limited(plan.sql, fit, rows))
        return plan, cur.fetchmany(fit), fresh


def _limited(sql: str, fit: int, rows: int) -> str:
    return sql if fit >= rows else f"{sql} LIMIT {fit}"


def _within(c: str, limit: int) -> str:
    """`c` where its text (what is sent) is at most `limit` bytes, else NULL.

    `pg_column_size` is the stored size, compressed for a TOASTed value (a 1 MB jsonb of one
    repeated character stores in 11 KB), so it only rules out what is large even compressed,
    without building its text; the rest is measured by its text, built on the server only. A CASE
    evaluates its branches in order, so a value over `limit` stored is never turned into text here.
    """
    return (
        f"CASE WHEN pg_column_size({c}) > {limit} THEN NULL "
        f"WHEN octet_length({c}::text) <= {limit} THEN {c} END"
    )


def wrap(
    sql: str, columns: list[WireColumn], rows: int, budget: CellBudget, *, guard: bool = False
) -> ClipPlan:
    """`SELECT <clipped cells> FROM (<sql>) AS q(c1, ...)`: PostgreSQL keeps a subquery's order.

    `guard` (a remembered description, `run`): fixed-size columns are sent only up to 32,767 bytes
    of text. Every other non-text, non-binary value (json, jsonb, arrays, composites, xml, numeric,
    ranges...) is sent whole only where its text fits the cell, else clipped text: measured on its
    uncompressed text, never on its stored (possibly compressed) size.
    """
    cell = budget.cell_bytes(rows, len(columns))
    chars = text_chars(cell)
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    parts: list[str] = []
    widths: list[int] = []
    merges: list[Any] = []
    for i, col in enumerate(columns):
        c = f"q.c{i}"
        if col.kind == "fixed":
            parts.append(_within(c, _MAX_TYPLEN) if guard else c)
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
            parts.append(_within(c, cell))
            parts.append(
                f"CASE WHEN pg_column_size({c}) > {cell} THEN left({c}::text, {chars}) "
                f"WHEN octet_length({c}::text) > {cell} THEN left({c}::text, {chars}) END"
            )
            widths.append(2)
            merges.append(text_or_clipped)
    text = f"SELECT {', '.join(parts) or '*'} FROM ({sql}) AS q({names})"
    return ClipPlan(text, tuple(columns), tuple(widths), tuple(merges))
