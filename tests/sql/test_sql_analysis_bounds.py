"""Bounds on work the SQL text hides (red team rt33a F4) and on analysis under concurrency (F3).

F4: 148 chained CTEs of `SELECT *` over a 600-column table kept PostgreSQL's planner busy 21.5 s
past a 1 s statement_timeout. Admission's merge work (`admission.merge_work`) counted a `*` over a
table as 64 columns; it now reads the table's width from the catalog, so a chain over a wide table
is refused before it reaches the database (checked with `admit`: unbounded, 40 levels over 600
columns plan 1.5 s with no interrupt check). F3: concurrent valid analyses shared the GIL and a wall-clock
deadline, so all of them were refused; now the deadline is the analysing thread's CPU time.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import AnalysisBudget
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryTimeout
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv, PgScratch, pg_scratch

WIDTH = 600


@pytest.fixture(scope="module")
def scratch(pg_url: str) -> Iterator[PgScratch]:
    """A reader on `wide`, a table of 600 integer columns and two rows."""
    with pg_scratch(pg_url, "plan") as s:
        columns = ", ".join(f"c{i} int" for i in range(WIDTH))
        s.admin.execute(f"CREATE TABLE wide ({columns})")
        s.admin.execute("INSERT INTO wide (c0) VALUES (1), (2)")
        s.admin.execute(f"GRANT SELECT ON wide TO {s.reader}")
        yield s


@pytest.fixture
def service(scratch: PgScratch) -> Iterator[SqlService]:
    engine = SqlEngine(scratch.reader_url)
    try:
        yield SqlService(engine, timeout_s=10.0)
    finally:
        engine.close()


def _chain(levels: int) -> str:
    parts = ["t0 AS (SELECT * FROM wide)"] + [f"t{k} AS (SELECT * FROM t{k - 1})" for k in range(1, levels)]
    return f"WITH {', '.join(parts)} SELECT count(*) FROM t{levels - 1}"


@pytest.mark.postgres
def test_postgres_star_chain_over_a_wide_table_counts_the_tables_width(service: SqlService) -> None:
    # 40 levels of `SELECT *` over 600 columns: 516,001 units of merge work with the catalog's
    # width, 55,041 with a table's `*` counted as 64 columns (under the 200,000 budget).
    with pytest.raises(Refused) as info:
        service.admit(_chain(40), 25)
    assert info.value.data == {"reason": "too_complex"}


@pytest.mark.postgres
def test_postgres_ordinary_select_star_over_a_wide_table_runs(service: SqlService) -> None:
    sql = (
        "WITH a AS (SELECT * FROM wide), b AS (SELECT * FROM a WHERE c0 IS NOT NULL),"
        " c AS (SELECT b.*, 1 AS one FROM b) SELECT c0, c599, one FROM c"
    )
    result, _ = service.query(sql, call_id="wide")
    assert result.row_count == 2
    result, _ = service.query(_chain(12), call_id="chain")  # 54,001 units of merge work
    assert result.rows == [[2]]


def _heavy(n: int, tag: int) -> str:
    """A valid query whose analysis is heavy: one CASE of `n` branches (distinct per `tag`)."""
    branches = " ".join(f"WHEN region || '{tag}' = 'a{i}' THEN {i}" for i in range(n))
    return f"SELECT CASE {branches} END AS k FROM sales_demo"


@pytest.mark.alone
@pytest.mark.serial  # measures CPU and wall time: other workers' load would be counted
def test_concurrent_heavy_analyses_all_pass_on_cpu_time(sqlite_env: DbEnv) -> None:
    engine = SqlEngine(sqlite_env.ro_url)
    # A whole suite's objects make each garbage collection long, and it is charged to whichever
    # thread allocates: in CI one analysis went past twice its calibrated time that way.
    gc.collect()
    gc.freeze()
    try:
        calibrate = SqlService(engine, plans=0)
        alone = 0.0
        for k in (0, 4):
            start = time.thread_time()
            calibrate.query(_heavy(250, k), call_id="alone")
            alone = max(alone, time.thread_time() - start)
        # Budget: twice the slower of two analyses alone (a thread's CPU time varies by half on a
        # busy host). Four at once on a wall clock take about four times as long each, past it; on
        # the analysing thread's CPU clock each stays at one.
        service = SqlService(engine, plans=0, budget=AnalysisBudget(seconds=2 * alone + 0.05))
        with ThreadPoolExecutor(4) as pool:
            calls = [pool.submit(service.query, _heavy(250, k), call_id=f"c{k}") for k in (1, 2, 3, 4)]
            results = [c.result() for c in calls]
        assert all(r.row_count > 0 for r, _ in results)
    finally:
        gc.unfreeze()
        engine.close()


def test_analysis_slot_queues_long_texts_and_never_short_ones() -> None:
    from mcpkit.sql.admission.slots import QUEUED_FROM, analysis_slot

    one = threading.BoundedSemaphore(1)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with analysis_slot(5.0, QUEUED_FROM, one):
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        with analysis_slot(5.0, QUEUED_FROM - 1, one):  # a short text does not wait
            pass
        with pytest.raises(QueryTimeout), analysis_slot(0.05, QUEUED_FROM, one):
            pass
    finally:
        release.set()
        holder.join()
    with analysis_slot(1.0, QUEUED_FROM, one):  # freed again
        pass


@pytest.mark.alone
@pytest.mark.serial  # measures CPU and wall time: other workers' load would be counted
def test_analysis_deadline_counts_cpu_time_under_a_wall_ceiling() -> None:
    from mcpkit.sql.admission.slots import analysis_slot

    deadline = AnalysisBudget(seconds=0.05).deadline()
    time.sleep(0.1)  # waiting (for the GIL, a slot, the database) is not analysis
    AnalysisBudget.check_deadline(deadline)
    with analysis_slot(0.05, 0):
        deadline = AnalysisBudget(seconds=60).deadline()
        time.sleep(0.1)
        with pytest.raises(Refused) as info:  # the call's own timeout is the ceiling
            AnalysisBudget.check_deadline(deadline)
    assert info.value.data == {"reason": "too_complex"}
    burn = AnalysisBudget(seconds=0.02).deadline()
    while time.thread_time() <= burn:
        pass
    with pytest.raises(Refused):
        AnalysisBudget.check_deadline(burn)


def test_a_proven_caller_analyses_one_long_text_at_a_time() -> None:
    from mcpkit.sql.admission import slots

    two = threading.BoundedSemaphore(2)
    held, release = threading.Event(), threading.Event()

    def alice_long() -> None:
        with slots.analysis_caller("alice"), slots.analysis_slot(5.0, slots.QUEUED_FROM, two):
            held.set()
            release.wait(5)

    holder = threading.Thread(target=alice_long)
    holder.start()
    try:
        assert held.wait(5)
        with slots.analysis_caller("alice"):
            with pytest.raises(QueryTimeout), slots.analysis_slot(0.05, slots.QUEUED_FROM, two):
                pass  # her second long text waits for her first, not for a free slot
            with slots.analysis_slot(5.0, 10, two):  # her short texts never wait
                pass
        with slots.analysis_caller("bob"), slots.analysis_slot(0.5, slots.QUEUED_FROM, two):
            pass  # another caller takes the free slot
    finally:
        release.set()
        holder.join()
    assert slots._callers == {}  # nothing kept per caller once its calls end
