"""`SqlEngine`: the one engine over SQLAlchemy: pooled connections, a fresh read-only session per call.

A connection is reused only after its profile reset it (`Profile.reset`: PostgreSQL `ROLLBACK` and
`DISCARD ALL`'s commands in one message, MySQL/MariaDB `COM_RESET_CONNECTION`, SQLite a check that
nothing was left behind) at the end of the call; one that failed, timed out, was interrupted or failed
its reset is closed, never reused. Where the dialect has a `run` hook (PostgreSQL), `execute_query`'s
begin, describe and query go in one round trip (`engines.clipped.run_clipped`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.engine import Engine as SaEngine
from sqlalchemy.exc import DBAPIError, PendingRollbackError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import ConnectionPoolEntry, NullPool, PoolResetState, QueuePool
from sqlglot import exp

from mcpkit.errors import Refused
from mcpkit.sql.clipping import CellBudget
from mcpkit.sql.dialects import normalize_url
from mcpkit.sql.engines import watchdog
from mcpkit.sql.engines.base import Column, Params, Rows
from mcpkit.sql.engines.clipped import clipped_rows, run_clipped
from mcpkit.sql.engines.described import Remembered
from mcpkit.sql.engines.isolated import isolation, run_isolated
from mcpkit.sql.errors import FailureKind, QueryFailed, QueryTimeout, SqlConfigError, row_count_failure
from mcpkit.sql.profiles import Profile, profile_for
from mcpkit.sql.profiles.base import Outcome
from mcpkit.sql.profiles.budget import DEFAULT_POOL_SIZE
from mcpkit.sql.reverify import MOVES_RETRIED, CatalogMoved, Guard

__all__ = ["DEFAULT_POOL_SIZE", "SqlEngine"]

log = logging.getLogger("mcpkit.sql")
_LOGGED_ERROR_CHARS: Final = 2000
"""The database's error text kept in the operator's log (a failed cast of 200 MB quoted all of it)."""

_POOL_WAIT_S: Final = 30.0  # how long a call waits for a free connection when all are busy
_RESET_DONE: Final = "mcpkit_reset_done"  # pool record flag: `session` already reset the connection
_BEGUN: Final = "mcpkit_begun"  # a deferred session sent its begin itself (to verify the catalog first)
_POOL_RECYCLE_S: Final = 300.0  # a connection's lifetime: bounds what is read only at login
# Failures after which the connection is as good as before (the reset cleans up); any other
# outcome (timeout, connection, resource, unclassified) closes it.
_KEEP_AFTER: Final[frozenset[FailureKind]] = frozenset(
    {"syntax", "undefined_object", "permission", "read_only", "data"}
)


class SqlEngine:
    """An `Engine` over SQLAlchemy: pooled connections, each call in its own read-only session.

    Every call opens a read-only transaction with its own timeout and identity on a connection
    that holds nothing of earlier calls: the profile resets each connection as it goes back to
    the pool (`Profile.reset`), and a connection that failed, timed out, was interrupted or failed
    its reset is closed instead. What differs per database (session set-up, reset, interrupting,
    error classes) is the URL's profile.

    Args:
        dsn: A SQLAlchemy URL; `postgresql://` and `mysql://` pick psycopg and pymysql.
        grace_s: How long past the database's own timeout the watchdog waits before it
            interrupts the statement from another thread.
        pool_size: Connections kept open at most; 0: a new connection per call, closed after it.
        pool_wait_s: How long a call waits for a free connection when all are busy; then it
            fails as `resource` ("the database is busy").
        isolate: SQLite: run `execute`'s statements in killable worker processes (`isolated`);
            None: `isolated.ISOLATE_DEFAULT`. Other databases stop their own statements.
    """

    def __init__(
        self,
        dsn: str | URL,
        *,
        grace_s: float = 1.0,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_wait_s: float = _POOL_WAIT_S,
        isolate: bool | None = None,
    ) -> None:
        if not 0 <= pool_size <= 1000:
            raise SqlConfigError("the pool size (--pool-size) must be between 0 (no pool) and 1000")
        self.url = normalize_url(dsn)
        self.profile: Profile = profile_for(self.url)
        self.pool_size = pool_size if self.profile.poolable else 0
        self._pool_wait_s = pool_wait_s
        self._generation = self.profile.policy_generation
        self._grace_s = grace_s
        self.profile.use_pool(self, self.pool_size)
        self._sa: SaEngine = self._new_pool()
        self.isolated = isolation(self.url, self.profile, isolate, pool_size, pool_wait_s, grace_s)
        self.guard: Guard | None = None  # re-verification while serving (`mcpkit.sql.reverify`)
        self._described = Remembered()
        self._errors: tuple[type[BaseException], ...] = (SQLAlchemyError, *self.profile.extra_errors)
        dbapi = getattr(self._sa.dialect, "loaded_dbapi", None)
        for name in ("Error", "Warning"):
            err = getattr(dbapi, name, None)
            if isinstance(err, type) and issubclass(err, BaseException):
                self._errors += (err,)

    def _new_pool(self) -> SaEngine:
        """A SQLAlchemy engine with its own pool of this engine's size, reset by the profile."""
        pooling: dict[str, Any] = (
            {"poolclass": NullPool}
            if self.pool_size == 0
            else {
                "poolclass": QueuePool,
                "pool_size": self.pool_size,
                "max_overflow": 0,
                "pool_timeout": self._pool_wait_s,
                "pool_recycle": _POOL_RECYCLE_S,
                "pool_reset_on_return": None,  # the profile's reset rolls back and more
            }
        )
        sa = create_engine(self.url, **pooling, **self.profile.engine_options(self.url))
        if self.pool_size:
            event.listen(sa, "reset", self._reset)
        return sa

    def for_login(self, username: str, password: str | None) -> SqlEngine:
        """An engine like this one (same options, its own pool and guard) that logs in as another user."""
        login, pool = self.url.set(username=username, password=password), self.pool_size
        other = SqlEngine(
            login,
            grace_s=self._grace_s,
            pool_size=pool,
            pool_wait_s=self._pool_wait_s,
            isolate=self.isolated is not None,
        )
        other.guard = self.guard.fresh(f"login {username}") if self.guard is not None else None
        if self.profile.name_pin:  # its calls resolve names as the masking analysis does
            other.profile.pin_name_path(self.profile.name_pin)
        other.profile.index_scans_off = self.profile.index_scans_off  # read as the analysis expects
        if self.profile.function_policy is not None:  # its views are checked as this one's
            other.profile.use_function_policy(self.profile.function_policy)
        return other

    def _reset(self, dbapi: Any, record: ConnectionPoolEntry, state: PoolResetState) -> None:
        """Pool `reset` hook: clean a connection going back to the pool; raising discards it."""
        if record.info.pop(_RESET_DONE, False) or state.terminate_only:  # reset by `session`, or closing
            return
        self.profile.reset(dbapi, self.url)

    @property
    def dialect(self) -> str:
        """The sqlglot dialect name."""
        return self.profile.dialect

    @property
    def sa_engine(self) -> SaEngine:
        """The SQLAlchemy engine (for reflection)."""
        return self._sa

    def _fail(self, exc: BaseException, fired: bool, timeout_s: float, call_id: str) -> Exception:
        orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        outcome: Outcome = "timeout" if fired else self.profile.classify(orig)
        if outcome == "other" and row_count_failure(orig):
            outcome = "data"
        if isinstance(exc, PoolTimeout):  # every pooled connection stayed busy for pool_wait_s
            outcome = "resource"
        detail = str(orig)
        if isinstance(exc, PendingRollbackError):  # the cause was read past (a check that tolerates it)
            detail = "the connection was lost earlier in the call (killed at its deadline, or dropped)"
        if len(detail) > _LOGGED_ERROR_CHARS:  # an input function's error quotes its whole input
            detail = f"{detail[:_LOGGED_ERROR_CHARS]}... ({len(detail)} characters)"
        log.warning("sql call %s failed (%s): %s: %s", call_id, outcome, type(orig).__name__, detail)
        if outcome == "timeout":
            return QueryTimeout(timeout_s, call_id)
        return QueryFailed(outcome, call_id, message=self.profile.failure_message(orig))

    def _begin(self, timeout_s: float, call_id: str, *, deferred: bool = False) -> tuple[Connection, Any]:
        """A connection with the call's session begun; a stale pooled one is replaced once.

        `deferred`: the caller sends the begin itself (`_prelude`), ahead of its first statement.
        """
        if self._generation != self.profile.policy_generation:
            self._generation = self.profile.policy_generation
            self._sa.dispose()  # connections opened under an earlier policy are not reused
        for attempt in (1, 2):
            try:
                conn = self._sa.connect()
            except PoolTimeout as exc:
                raise self._fail(exc, False, timeout_s, call_id) from None  # resource: the pool stayed busy
            except self._errors as exc:
                # Whatever else the driver says (a dropped database, a refused login), no session
                # means the database cannot serve this call: a connection failure, retryable.
                orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
                log.warning("sql call %s could not connect: %s: %s", call_id, type(orig).__name__, orig)
                # The login's connection limit (MySQL MAX_USER_CONNECTIONS, PostgreSQL CONNECTION
                # LIMIT) is the database bounding the calls: busy, not unreachable.
                busy = self.profile.classify(orig) == "resource"
                raise QueryFailed("resource" if busy else "connection", call_id) from None
            dbapi = conn.connection.driver_connection
            if deferred:
                return conn, dbapi
            try:
                self.profile.begin(dbapi, timeout_s, call_id)
            except self._errors as exc:
                conn.invalidate()
                conn.close()
                orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
                if attempt == 1 and self.pool_size and self.profile.classify(orig) == "connection":
                    log.info("sql call %s: a pooled connection was gone; opening another", call_id)
                    continue
                raise self._fail(exc, False, timeout_s, call_id) from None
            except BaseException:
                conn.invalidate()
                conn.close()
                raise
            return conn, dbapi
        raise AssertionError("unreachable")  # pragma: no cover

    def _prelude(self, conn: Connection, dbapi: Any, timeout_s: float, call_id: str) -> list[str]:
        """What a deferred session (`session(deferred=True)`) must send before anything else:
        nothing of the begin when the session had to send it itself (to verify the catalog first)."""
        if conn.info.pop(_BEGUN, False):
            return []
        return self.profile.begin_statements(dbapi, timeout_s, call_id)

    @contextmanager
    def session(
        self, timeout_s: float, call_id: str, *, deferred: bool = False
    ) -> Iterator[tuple[Connection, Any]]:
        """A connection in a fresh read-only transaction with the timeout armed; rolled back after.

        With `deferred` nothing is sent yet: the caller sends `_prelude`'s statements first, in
        the same round trip as its own (a failure there fails the call, and nothing after it runs).

        The connection goes back to the pool only if the call ended cleanly or failed in a way
        that leaves the connection as it was (syntax, permission, ...), and then only after its
        profile's reset; otherwise (timeout, interrupt, lost connection, unknown) it is closed.

        Yields:
            The SQLAlchemy connection and its driver connection.

        Raises:
            QueryFailed: the database failed (masked).
            QueryTimeout: the deadline passed.
        """
        conn, dbapi = self._begin(timeout_s, call_id, deferred=deferred)
        fired = threading.Event()

        def interrupt() -> None:
            fired.set()
            try:
                self.profile.interrupt(dbapi, self.url)
            except Exception:
                log.exception("sql call %s: interrupting the statement failed", call_id)

        alarm = watchdog.arm(timeout_s + self._grace_s, interrupt)
        keep = True
        try:
            if self.guard is not None and self.guard.due(conn):
                # the catalog changed, or the last proof is old: verify first, inside the call's
                # read-only transaction (so a deferred session sends its begin now, not in `_prelude`)
                if deferred:
                    self.profile.begin(dbapi, timeout_s, call_id)
                    conn.info[_BEGUN] = True
                self.guard.check(self, conn, dbapi, call_id)
            yield conn, dbapi
            if self.guard is not None:  # with masks: the catalog read again before rows are returned
                self.guard.after(self, conn, dbapi, call_id)
        except Refused:  # refused by mcpkit before the query ran (too wide): the connection is fine
            raise
        except self._errors as exc:
            failure = self._fail(exc, fired.is_set(), timeout_s, call_id)
            keep = isinstance(failure, QueryFailed) and failure.kind in _KEEP_AFTER
            raise failure from None
        except BaseException:
            keep = False
            raise
        finally:
            alarm.disarm()  # waits for an interrupt under way: it lands on this call, not the next
            # A connection SQLAlchemy invalidated mid-call (killed at the deadline while a check that
            # tolerates a failed statement ran) raises `PendingRollbackError` on any use: drop it.
            keep = keep and not fired.is_set() and not conn.invalidated
            if not conn.invalidated:
                conn.info.pop(_BEGUN, None)
            try:
                if keep and self.pool_size:
                    # The reset ends the transaction too: one round trip instead of two.
                    self.profile.reset(dbapi, self.url)
                    conn.info[_RESET_DONE] = True  # the pool's reset hook has nothing left to do
                else:
                    self.profile.end(dbapi)
            except Exception as exc:  # a broken connection is dropped, never reused
                log.info("sql call %s: ending the call failed (%s); dropping the connection", call_id, exc)
                keep = False
            if not keep:
                conn.invalidate()
            conn.close()  # back to the pool (reset above, or by the pool's hook), or closed

    def execute(
        self,
        sql: str,
        params: Params | None,
        limit: int,
        timeout_s: float,
        call_id: str,
        *,
        clip: CellBudget | None = None,
        tree: exp.Expr | None = None,
    ) -> Rows:
        """Run one statement read-only and return at most `limit` rows (`Rows`).

        Args:
            sql: The statement. With `params` None it is sent exactly as given; otherwise it
                names parameters `:name` and goes through SQLAlchemy's `text()`.
            params: Bind parameters, or None.
            limit: Rows to return; one more is fetched to tell whether more exist.
            timeout_s: Deadline for the database work.
            call_id: Shown to the database (application_name / comment) and in the log.
            clip: Clip cells inside the SQL sent (`mcpkit.sql.clipping`), so no cell over the
                budget reaches the driver; a clipped cell comes back as `Clipped`/`BinarySize`.
            tree: Admission's parse of `sql`, for a profile that reads its shape (MariaDB's temp space).

        With masks, rows read while the catalog moved are discarded (`Guard.after`) and the
        statement runs again after the verification passed again, up to `MOVES_RETRIED` times;
        then a move answers as a failed verification (`SOURCE_UNVERIFIED`).
        """
        for _ in range(MOVES_RETRIED):
            try:
                return self._execute(sql, params, limit, timeout_s, call_id, clip, tree)
            except CatalogMoved:
                continue  # verified again: run on the catalog as it is now
        return self._execute(sql, params, limit, timeout_s, call_id, clip, tree)  # moved again: refused

    def _execute(
        self,
        sql: str,
        params: Params | None,
        limit: int,
        timeout_s: float,
        call_id: str,
        clip: CellBudget | None,
        tree: exp.Expr | None,
    ) -> Rows:
        if self.isolated is not None:
            return run_isolated(self, sql, params, limit, timeout_s, call_id, clip)
        clipping = self.profile.clipping() if clip is not None and params is None else None
        started = time.perf_counter()
        if clipping is not None and clipping.run is not None and clip is not None:
            return run_clipped(self, clipping.run, sql, limit, timeout_s, call_id, clip, started)
        with self.session(timeout_s, call_id) as (conn, dbapi):
            if clipping is not None and clip is not None:
                described = clipping.describe(dbapi, sql, tree)
                fit = clip.fit(limit + 1, len(described))
                plan = clipping.wrap(sql, described, fit, clip)
                cursor = dbapi.cursor()
                try:  # a wide row: fewer rows, cut in the SQL sent (LIMIT), so the bound holds on the wire
                    self.profile.run(
                        cursor, plan.sql if fit > limit else f"{plan.sql} LIMIT {fit}", call_id, tree
                    )
                    fetched = [plan.reassemble(r) for r in cursor.fetchmany(fit)]
                finally:
                    cursor.close()
                return clipped_rows(plan, fetched, fit, limit, time.perf_counter() - started, call_id)
            if params is None:
                cursor = dbapi.cursor()
                try:
                    self.profile.run(cursor, sql, call_id, tree)
                    description = cursor.description
                    fetched = cursor.fetchmany(limit + 1) if description else []
                finally:
                    cursor.close()
            else:
                result = conn.execute(text(sql), dict(params))
                description = result.cursor.description if result.returns_rows and result.cursor else None
                fetched = list(result.fetchmany(limit + 1)) if result.returns_rows else []
                result.close()
            elapsed = time.perf_counter() - started
            types = self.profile.type_names(dbapi, description) if description else []
        columns = tuple(Column(str(d[0]), t) for d, t in zip(description or (), types, strict=False))
        log.debug("sql call %s: %d row(s) in %.1f ms", call_id, len(fetched), elapsed * 1000)
        return Rows(
            columns=columns,
            rows=tuple(tuple(r) for r in fetched[:limit]),
            more=len(fetched) > limit,
            elapsed_s=elapsed,
            call_id=call_id,
        )

    def close(self) -> None:
        """Close every pooled connection (`dispose`) and `Profile.release_pool` (SQLite's heap limit)."""
        if self.isolated is not None:
            self.isolated.close()
        self._sa.dispose()
        self.profile.release_pool(self)
