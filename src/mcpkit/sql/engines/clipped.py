"""`SqlEngine.execute` with a cell budget: the dialect's one-round-trip `run`, the rows of a clipped run."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from mcpkit.sql.clipping import CellBudget, ClipPlan, Run, StaleDescription
from mcpkit.sql.engines.base import Column, Rows
from mcpkit.sql.errors import QueryFailed

if TYPE_CHECKING:
    from mcpkit.sql.engines.engine import SqlEngine

__all__ = ["clipped_rows", "run_clipped"]

log = logging.getLogger("mcpkit.sql")


def run_clipped(
    engine: SqlEngine,
    run: Run,
    sql: str,
    limit: int,
    timeout_s: float,
    call_id: str,
    clip: CellBudget,
    started: float,
) -> Rows:
    """`execute` through the dialect's `run` hook: the begin, the describe and the query sent
    together, with the description an earlier call made.

    Descriptions are remembered per engine (one login, one role) and SQL text; one is
    forgotten when a call that used it fails, and it is only ever used after the same call's
    own describe matched it (`clipping.postgres.run`). A stale one whose query failed makes
    the call run once more without it (on a new connection: the transaction was aborted). As
    the begin travels with the query, a pooled connection found gone fails the call's first
    round trip, which is then run once more on a new connection, as `_begin` does.
    """
    known, stale, gone = engine._described.get(sql), False, False
    while True:
        try:
            with engine.session(timeout_s, call_id, deferred=True) as (conn, dbapi):
                prelude = engine._prelude(conn, dbapi, timeout_s, call_id)
                plan, wire, fresh = run(dbapi, sql, limit + 1, clip, known, prelude)
        except StaleDescription:
            engine._described.pop(sql)
            log.info("sql call %s: the result's columns changed since they were described", call_id)
            if stale:  # pragma: no cover: a run without a remembered description is never stale
                raise
            known, stale = None, True
            continue
        except QueryFailed as exc:
            engine._described.pop(sql)
            if exc.kind == "connection" and engine.pool_size and not gone:
                log.info("sql call %s: a pooled connection was gone; opening another", call_id)
                gone = True
                continue
            raise
        except BaseException:
            engine._described.pop(sql)
            raise
        engine._described.put(sql, fresh)
        fetched = [plan.reassemble(r) for r in wire]
        fit = clip.fit(limit + 1, len(plan.columns))  # as `run` fetched: a wide row, fewer rows
        return clipped_rows(plan, fetched, fit, limit, time.perf_counter() - started, call_id)


def clipped_rows(
    plan: ClipPlan, fetched: list[tuple[Any, ...]], fit: int, limit: int, elapsed: float, call_id: str
) -> Rows:
    """The rows of a clipped run that fetched at most `fit` (`CellBudget.fit`) of `limit` + 1."""
    columns = tuple(Column(c.name, c.type_name) for c in plan.columns)
    if fit <= limit:  # a wide row: fewer rows were fetched; the last one only tells whether more exist
        cut = len(fetched) == fit
        kept = tuple(fetched[: fit - 1]) if cut else tuple(fetched)
        return Rows(columns, kept, cut, elapsed, call_id, cut_for_size=cut)
    return Rows(columns, tuple(fetched[:limit]), len(fetched) > limit, elapsed, call_id)
