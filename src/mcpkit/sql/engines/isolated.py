"""SQLite statements in worker processes the operating system stops: killed at the call's deadline.

SQLite checks its interrupt and progress handler only at some opcodes; one VM step (a multi-path
`json_extract` over a large object, hundreds of NOCASE comparisons of long values, a `CASE` whose
false `WHEN`s jump forward) can run for tens of seconds past them, holding a pool slot and a core.
Here each call's statement runs in a worker process that opened the database with the very same
profile set-up (an `SqlEngine` of one connection: authorizer, limits, bounded functions, heap limit,
progress handler); the parent waits the call's timeout plus the grace and a little more, then kills
the worker (SIGKILL), answers the call `timeout` as before and starts a fresh worker for the next call.
Each worker's data segment is capped (`RLIMIT_DATA`): past it allocations fail inside SQLite
(`resource`) or the worker dies, which the parent answers `resource` too.

Workers are forked from a zygote (`zygote`), never from the threaded server, and talk over a socket in
plain data (rows, columns, a failure's kind and fixed sentence); one is reused while the policy holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from multiprocessing.connection import Connection as Pipe
from typing import TYPE_CHECKING, Any, Final

from mcpkit.errors import Refused
from mcpkit.sql.engines.base import Params, Rows
from mcpkit.sql.engines.worker import HEADROOM, MEMORY_LIMIT, RETIRE_BYTES, Setup
from mcpkit.sql.engines.zygote import start_worker, warm
from mcpkit.sql.errors import QueryFailed, QueryTimeout

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from mcpkit.sql.clipping import CellBudget
    from mcpkit.sql.engines.engine import SqlEngine
    from mcpkit.sql.profiles import Profile
    from mcpkit.sql.profiles.sqlite import SqliteProfile

__all__ = [
    "HEADROOM",
    "ISOLATE_ENV",
    "KILL_SLACK_S",
    "MEMORY_LIMIT",
    "RETIRE_BYTES",
    "IsolatedSqlite",
    "isolation",
    "run_isolated",
]

log = logging.getLogger("mcpkit.sql")

KILL_SLACK_S: Final = 0.5
"""Past the call's timeout and the engine's grace (when the in-process interrupt fires): then SIGKILL."""
ISOLATE_ENV: Final = "MCPKIT_SQLITE_ISOLATE"
"""`0` turns the worker processes off where no option chose (`SqlEngine(isolate=None)`); on by default."""
_START_WAIT_S: Final = 30.0  # a worker that is not ready by then failed to start


def isolation(
    url: URL, profile: Profile, isolate: bool | None, pool_size: int, wait_s: float, grace_s: float
) -> IsolatedSqlite | None:
    """A SQLite engine's workers when it isolates (`isolate`, else `ISOLATE_ENV`, else on); else None."""
    from mcpkit.sql.profiles.budget import DEFAULT_POOL_SIZE
    from mcpkit.sql.profiles.sqlite import SqliteProfile

    chosen = isolate if isolate is not None else os.environ.get(ISOLATE_ENV, "1").strip() != "0"
    if not chosen or not isinstance(profile, SqliteProfile):
        return None
    size = pool_size or DEFAULT_POOL_SIZE
    rendered = url.render_as_string(hide_password=False)
    return IsolatedSqlite(rendered, profile, size=size, wait_s=wait_s, grace_s=grace_s)


def run_isolated(
    engine: SqlEngine,
    sql: str,
    params: Params | None,
    limit: int,
    timeout_s: float,
    call_id: str,
    clip: CellBudget | None,
) -> Rows:
    """`SqlEngine.execute` in a worker, inside a session of the engine's own pool: the pool bounds the
    calls as without workers (all connections busy: `resource`), a `Guard`'s catalog checks run
    around it, and a call that ended its worker (timeout, resource) drops its pooled connection too."""
    from mcpkit.sql.engines.engine import _KEEP_AFTER

    workers = engine.isolated
    assert workers is not None
    with engine.session(timeout_s, call_id):
        outcome = workers.execute(sql, params, limit, timeout_s, call_id, clip)
        if isinstance(outcome, QueryTimeout) or (
            isinstance(outcome, QueryFailed) and outcome.kind not in _KEEP_AFTER
        ):
            raise outcome
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


class _Worker:
    __slots__ = ("generation", "pid", "pipe")

    def __init__(self, pid: int, pipe: Pipe, generation: tuple[int, bool]) -> None:
        self.pid, self.pipe, self.generation = pid, pipe, generation

    def alive(self) -> bool:
        """An idle worker has nothing to say: a readable socket is its end (EOF)."""
        try:
            return not self.pipe.closed and not self.pipe.poll(0)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the worker unless it is seen gone, then close our end (one that answered late ends
        at that EOF by itself). A worker that ended is reaped by the zygote at once (SIGCHLD ignored),
        so its pid may be another process's by now: a readable socket (EOF or a late reply) is no signal."""
        if self.pipe.closed:
            return
        try:
            running = not self.pipe.poll(0)
        except OSError:
            running = False
        if running:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self.pipe.close()


class IsolatedSqlite:
    """At most `size` SQLite workers, each running one call at a time; a call waits `wait_s` for one.

    Args:
        url: The database URL (the engine's, password included: the worker logs in itself).
        profile: The parent engine's profile; its function policy, masks and vectors are copied into
            each worker, which is replaced when `policy_generation` (or `vectors`) changes.
        size: Workers at most (calls running at once).
        wait_s: How long a call waits for a free worker; then `resource` ("the database is busy").
        grace_s: The engine's grace past the timeout (the worker's own interrupt); the kill follows
            `KILL_SLACK_S` later.
        memory_bytes: Each worker's `RLIMIT_DATA`; 0: none; None: `MEMORY_LIMIT`, raised to fit the
            worker's SQLite heap limit and `HEADROOM`.
    """

    def __init__(
        self,
        url: str,
        profile: SqliteProfile,
        *,
        size: int,
        wait_s: float,
        grace_s: float,
        memory_bytes: int | None = None,
    ) -> None:
        self._url, self._profile = url, profile
        self._size = max(size, 1)
        self._slots = threading.BoundedSemaphore(self._size)
        self._wait_s, self._grace_s = wait_s, grace_s
        self._memory = -1 if memory_bytes is None else memory_bytes
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.started = 0  # workers started so far (tests and the benchmark read it)
        self.killed = 0  # workers killed at a deadline
        warm()  # the fork server, once per process

    def _setup(self) -> Setup:
        p = self._profile.function_policy
        policy = None if p is None else (p.dialect, p.extra, p.only)
        w = self._profile
        return Setup(self._url, policy, w.withheld, w.vectors, self._grace_s, self._memory, self._size)

    def _start(self) -> _Worker:
        """A new worker, ready to answer; `QueryFailed("connection")` when it cannot open the database."""
        generation = (self._profile.policy_generation, self._profile.vectors)
        ours_sock, theirs = socket.socketpair()
        try:
            pid = start_worker(theirs)
        except OSError as exc:
            log.warning("a SQLite worker could not be started: %s", exc)
            ours_sock.close()
            raise QueryFailed("connection") from None
        finally:
            theirs.close()
        ours = Pipe(ours_sock.detach())
        worker = _Worker(pid, ours, generation)
        with contextlib.suppress(OSError):  # it died at once: answered below
            ours.send(self._setup())
        with self._lock:
            self.started += 1
        try:
            ready = ours.recv() if ours.poll(_START_WAIT_S) else ("failed", "connection", None)
        except (EOFError, OSError):
            ready = ("failed", "connection", None)
        if ready[0] != "ready":
            worker.kill()
            raise QueryFailed("connection")
        return worker

    def _take(self) -> _Worker:
        generation = (self._profile.policy_generation, self._profile.vectors)
        stale: list[_Worker] = []
        found: _Worker | None = None
        with self._lock:
            while self._idle and found is None:
                worker = self._idle.pop()
                if worker.generation == generation and worker.alive():
                    found = worker
                else:
                    stale.append(worker)
        for worker in stale:  # opened under an earlier policy (or gone): never reused
            worker.kill()
        return found if found is not None else self._start()

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:  # a background start may add one too many
                self._idle.append(worker)
                return
        worker.kill()

    def _replace(self) -> None:
        """Start a worker in the background for the next call (a killed one is gone)."""

        def start() -> None:
            try:
                worker = self._start()
            except QueryFailed:
                return
            self._give_back(worker)

        threading.Thread(target=start, name="mcpkit-sql-worker-start", daemon=True).start()

    def execute(
        self,
        sql: str,
        params: Params | None,
        limit: int,
        timeout_s: float,
        call_id: str,
        clip: CellBudget | None,
    ) -> Rows | Exception:
        """Run one call in a worker: its `Rows`, or the failure to raise (`QueryFailed`,
        `QueryTimeout`, `Refused`) with the same sentence and code as the in-process path."""
        if not self._slots.acquire(timeout=self._wait_s):
            log.warning("sql call %s failed (resource): every worker stayed busy", call_id)
            return QueryFailed("resource", call_id)
        try:
            try:
                worker = self._take()
            except QueryFailed as exc:
                return QueryFailed(exc.kind, call_id)
            return self._run(
                worker,
                (sql, dict(params) if params is not None else None, limit, timeout_s, call_id, clip),
                timeout_s,
                call_id,
            )
        finally:
            self._slots.release()

    def _run(
        self, worker: _Worker, call: tuple[Any, ...], timeout_s: float, call_id: str
    ) -> Rows | Exception:
        started = time.monotonic()
        try:
            worker.pipe.send(call)
            answered = worker.pipe.poll(timeout_s + self._grace_s + KILL_SLACK_S)
            retire, reply = worker.pipe.recv() if answered else (True, None)
        except (EOFError, OSError):
            retire, reply = True, ("died",)
        if reply is None:
            log.warning(
                "sql call %s failed (timeout): its worker ran %.1f s past the deadline; killed",
                call_id,
                time.monotonic() - started - timeout_s,
            )
            with self._lock:
                self.killed += 1
            worker.kill()
            self._replace()
            return QueryTimeout(timeout_s, call_id)
        if reply[0] == "died":
            # The data limit (or another signal) ended the worker mid-call: it needed too much.
            log.warning("sql call %s failed (resource): its worker died", call_id)
            worker.kill()
            self._replace()
            return QueryFailed("resource", call_id)
        if retire:  # it ends by itself after this answer: never handed another call
            worker.kill()
            self._replace()
        else:
            self._give_back(worker)
        kind = reply[0]
        if kind == "rows":
            rows: Rows = reply[1]
            return rows
        if kind == "timeout":
            return QueryTimeout(timeout_s, call_id)
        if kind == "refused":
            return Refused(reply[1], data=reply[2], expose_data=True)
        return QueryFailed(reply[1], call_id, message=reply[2])

    def close(self) -> None:
        """Stop every idle worker; a busy one is killed when its call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
