"""PostgreSQL memory no setting bounds, rebuilt from the red team's findings (rt15pg F7, F9).

A recursive CTE with UNION keeps every distinct row in a hash table outside `work_mem` and
`temp_file_limit` (F7: 1.7 GB by a 30 s timeout); regexp_split_to_array/_table record every
match of the whole text before the first row, about 75 and 15 bytes per character (F9: 780 MB
and 6 s past the answer over 100M characters). Figures in docs/security.md.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_admin, service_over

TIMEOUT_S = 3.0
SEARCH_TOO_LARGE = "The query searches strings too large to search within the time limit; narrow it."
DISTINCT_RECURSION = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < 1000000) SELECT count(*) FROM r"
)
SPLITS = {
    "regexp_split_to_array": "SELECT cardinality(regexp_split_to_array(repeat('a', 3000000), ''))",
    "regexp_split_to_table": "SELECT count(*) FROM regexp_split_to_table(repeat('a', 12000000), '')",
    "regexp_split_to_table of a computed text": "SELECT count(*) FROM (SELECT string_agg(g::text, '') AS t"
    " FROM generate_series(1, 2000000) g) s, regexp_split_to_table(s.t, '') p",
}


@pytest.fixture
def service(pg_url: str) -> Iterator[SqlService]:
    with service_over(pg_url, TIMEOUT_S) as service:
        yield service


@pytest.mark.postgres
def test_postgres_recursive_union_is_refused_union_all_and_cycle_answer(service: SqlService) -> None:
    with pytest.raises(Refused) as info:
        service.query(DISTINCT_RECURSION, call_id="pg-rec")
    assert info.value.data == {"reason": "too_complex"}
    assert "UNION ALL" in str(info.value)
    depth, _ = service.query(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000) SELECT count(*) AS c"
        " FROM r",
        call_id="pg-rec-all",
    )
    cycle, _ = service.query(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n % 5 + 1 FROM r) CYCLE n SET seen USING path"
        " SELECT count(*) FILTER (WHERE NOT seen) AS c FROM r",
        call_id="pg-rec-cycle",
    )
    assert (depth.rows, cycle.rows) == ([[1000]], [[5]])


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(SPLITS))
def test_postgres_regexp_split_of_a_large_text_is_resource(name: str, service: SqlService) -> None:
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        service.query(SPLITS[name], call_id="pg-split")
    assert (info.value.kind, info.value.message) == ("resource", SEARCH_TOO_LARGE)
    assert time.monotonic() - started < 3.0  # refused before the split started (the split takes far longer)


@pytest.mark.postgres
def test_postgres_regexp_split_of_a_document_answers_guarded(service: SqlService) -> None:
    sql = (
        "SELECT cardinality(regexp_split_to_array(repeat('word ', 200000), '\\s+')) AS words,"
        " (SELECT count(*) FROM regexp_split_to_table(repeat('ab', 1000000), '')) AS chars"
    )
    assert service.admit(sql, 100).sql.count("THEN CAST('mcpkit_search_bound ") == 2
    result, _ = service.query(sql, call_id="pg-split-ok")
    assert result.rows == [[200001, 2000000]]


@pytest.mark.postgres
def test_postgres_calls_run_without_parallel_workers(pg_url: str) -> None:
    """A call is one backend: parallel workers would each get their own per-process memory limit, and
    a Parallel Hash keeps its table in shared memory no process limit counts (red team rt20pg F1, F2,
    F5: one skewed join put 2 GB in /dev/shm). The control runs the same query outside mcpkit's
    session, where the planner does use workers, so the probe can see them."""
    tag = secrets.token_hex(4)
    table = f"mk_parallel_{tag}"
    query = f"SELECT count(*) AS n FROM {table} WHERE md5(s) LIKE '%ab%' AND md5(s || 'x') LIKE '%cd%'"
    with pg_admin(pg_url) as c:
        c.execute(f"CREATE TABLE {table} AS SELECT g AS id, g::text AS s FROM generate_series(1, 1500000) g")
        c.execute(f"ANALYZE {table}")
    try:
        with pg_admin(pg_url) as c:
            c.execute("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0")
            control = _peak_workers(pg_url, lambda: c.execute(query).fetchall(), "")
        assert control > 0, "the control query ran without workers: the probe cannot see them"
        with service_over(pg_url, 30.0) as service:
            seen = _peak_workers(pg_url, lambda: service.query(query, call_id=f"par{tag}"), f"par{tag}")
        assert seen == 0
    finally:
        with pg_admin(pg_url) as c:
            c.execute(f"DROP TABLE {table}")


def _peak_workers(pg_url: str, run: Callable[[], object], label: str) -> int:
    """The most parallel workers seen at once under a leader running `run` (whose application_name
    holds `label`, or any leader when `label` is empty)."""
    done = threading.Event()
    peak = 0

    def watch() -> None:
        nonlocal peak
        with pg_admin(pg_url) as c:
            while not done.is_set():
                row = c.execute(
                    "SELECT count(*) FROM pg_stat_activity w JOIN pg_stat_activity l ON l.pid = w.leader_pid"
                    " WHERE w.backend_type = 'parallel worker' AND l.application_name LIKE %s"
                    " AND w.datname = current_database()",
                    (f"%{label}%",),
                ).fetchone()
                peak = max(peak, int(row[0]) if row else 0)
                time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run()
    finally:
        done.set()
        watcher.join()
    return peak
