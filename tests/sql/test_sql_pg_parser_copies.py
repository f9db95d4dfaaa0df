"""PostgreSQL copies some operands while it parses: admission counts each copy (red team pg17 F6).

`a BETWEEN SYMMETRIC b AND c` becomes `(a >= b AND a <= c) OR (a >= c AND a <= b)`, so nesting
`a` multiplies by four per level; plain BETWEEN by two; `a IN (i1, ..., ik)` by the items that read
a column. Parse analysis and planning of the copied tree check no interrupt: eleven levels (700
bytes) took a backend to 10.8 GB and ran 2 min past a 3 s timeout, ignoring the cancel. Only small
levels are run here (seven: about 4 s and 600 MB on the old code); never run ten or more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from mcpkit.errors import Refused
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import DbEnv

TIMEOUT_S = 2.0
PEAK_MB = 200  # a backend answering these stays near 50 MB; the old code's took 500-800 MB


def _between(levels: int, symmetric: bool = True) -> str:
    e = "(id = 1)"
    for _ in range(levels):
        e = f"({e} BETWEEN {'SYMMETRIC ' if symmetric else ''}(id = 2) AND (id = 3))"
    return f"SELECT COUNT(*) AS n FROM sales_demo WHERE {e}"


def _in(levels: int, items: int) -> str:
    e = "(id = 1)"
    listed = ", ".join(f"(id = {i})" for i in range(2, 2 + items))
    for _ in range(levels):
        e = f"({e} IN ({listed}))"
    return f"SELECT COUNT(*) AS n FROM sales_demo WHERE {e}"


ATTACKS = {
    "between symmetric, 7 levels": _between(7),  # old code: 4.4 s, 617 MB
    "between, 14 levels": _between(14, symmetric=False),  # old code: 7.3 s, 798 MB
    "in of 7 items, 5 levels": _in(5, 7),  # old code: 4.3 s, 523 MB
}


@pytest.fixture
def service(pg_env: DbEnv) -> Iterator[SqlService]:
    engine = SqlEngine(pg_env.ro_url)
    try:
        yield SqlService(engine, timeout_s=TIMEOUT_S)
    finally:
        engine.close()


def _rss_mb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) // 1024 for line in f if line.startswith("RssAnon:")), 0)
    except OSError:
        return 0


class _BackendPeak:
    """The largest anonymous memory any backend of `user` holds while the block runs (the server runs
    on this host, as in the test setup)."""

    def __init__(self, admin_url: str, user: str) -> None:
        self.admin_url, self.user, self.peak, self.done = admin_url, user, 0, threading.Event()

    def _sample(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            while not self.done.is_set():
                sql = "SELECT pid FROM pg_stat_activity WHERE usename = %s"
                rows = admin.execute(sql, [self.user]).fetchall()
                self.peak = max([self.peak, *(_rss_mb(pid) for (pid,) in rows)])
                time.sleep(0.02)

    def __enter__(self) -> _BackendPeak:
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(0.1)
        self.done.set()
        self.thread.join()


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_postgres_nested_copied_operands_are_refused_before_they_parse(
    name: str, service: SqlService, pg_env: DbEnv, pg_url: str
) -> None:
    started = time.monotonic()
    user = make_url(pg_env.ro_url).username or ""
    with _BackendPeak(pg_url, user) as backends, pytest.raises(Refused) as info:
        service.query(ATTACKS[name], call_id="copies")
    assert info.value.data == {"reason": "too_complex"}
    assert time.monotonic() - started < TIMEOUT_S
    assert backends.peak < PEAK_MB


@pytest.mark.postgres
def test_postgres_between_and_in_as_analysts_write_them_still_answer(service: SqlService) -> None:
    plain = (
        "SELECT COUNT(*) AS n FROM sales_demo WHERE id BETWEEN 1 AND 10 AND id IN (id, id + 1, 3)"
        " AND id NOT BETWEEN SYMMETRIC 20 AND 15"
    )
    for sql in (plain, _between(5), _in(3, 8)):
        result, _ = service.query(sql, call_id="legit")
        assert isinstance(result.rows[0][0], int)
