"""`SqlEngine`: the one engine over SQLAlchemy, one fresh read-only connection per call."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.engine import Engine as SaEngine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from mcpkit.sql.clipping import CellBudget, hooks
from mcpkit.sql.dialects import normalize_url
from mcpkit.sql.engines.base import Column, Params, Rows
from mcpkit.sql.errors import QueryFailed, QueryTimeout
from mcpkit.sql.profiles import Profile, profile_for

__all__ = ["SqlEngine"]

log = logging.getLogger("mcpkit.sql")


class SqlEngine:
    """An `Engine` over SQLAlchemy: a new connection per call (`NullPool`), read-only by the database.

    What differs per database (session set-up, interrupting, error classes) is the URL's profile.

    Args:
        dsn: A SQLAlchemy URL; `postgresql://` and `mysql://` pick psycopg and pymysql.
        grace_s: How long past the database's own timeout the watchdog waits before it
            interrupts the statement from another thread.
    """

    def __init__(self, dsn: str | URL, *, grace_s: float = 1.0) -> None:
        self.url = normalize_url(dsn)
        self.profile: Profile = profile_for(self.url)
        self._grace_s = grace_s
        self._sa: SaEngine = create_engine(
            self.url, poolclass=NullPool, **self.profile.engine_options(self.url)
        )
        self._errors: tuple[type[BaseException], ...] = (SQLAlchemyError,)
        dbapi = getattr(self._sa.dialect, "loaded_dbapi", None)
        for name in ("Error", "Warning"):
            err = getattr(dbapi, name, None)
            if isinstance(err, type) and issubclass(err, BaseException):
                self._errors += (err,)

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
        outcome = "timeout" if fired else self.profile.classify(orig)
        log.warning("sql call %s failed (%s): %s: %s", call_id, outcome, type(orig).__name__, orig)
        if outcome == "timeout":
            return QueryTimeout(timeout_s, call_id)
        return QueryFailed(outcome, call_id)

    @contextmanager
    def session(self, timeout_s: float, call_id: str) -> Iterator[tuple[Connection, Any]]:
        """A fresh connection in a read-only transaction with the timeout armed; rolled back after.

        Yields:
            The SQLAlchemy connection and its driver connection.

        Raises:
            QueryFailed: the database failed (masked).
            QueryTimeout: the deadline passed.
        """
        fired = threading.Event()
        try:
            conn = self._sa.connect()
        except self._errors as exc:
            # Whatever the driver says (a dropped database, a refused login), no session means the
            # database cannot serve this call: a connection failure, retryable.
            orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            log.warning("sql call %s could not connect: %s: %s", call_id, type(orig).__name__, orig)
            raise QueryFailed("connection", call_id) from None
        dbapi = conn.connection.driver_connection

        def interrupt() -> None:
            fired.set()
            try:
                self.profile.interrupt(dbapi, self.url)
            except Exception:
                log.exception("sql call %s: interrupting the statement failed", call_id)

        watchdog = threading.Timer(timeout_s + self._grace_s, interrupt)
        watchdog.daemon = True
        try:
            self.profile.begin(dbapi, timeout_s, call_id)
            watchdog.start()
            yield conn, dbapi
        except self._errors as exc:
            raise self._fail(exc, fired.is_set(), timeout_s, call_id) from None
        finally:
            watchdog.cancel()
            try:
                self.profile.end(dbapi)
            except Exception as exc:  # a broken connection is dropped, never reused
                log.info("sql call %s: rollback failed (%s); dropping the connection", call_id, exc)
                conn.invalidate()
            conn.close()

    def execute(
        self,
        sql: str,
        params: Params | None,
        limit: int,
        timeout_s: float,
        call_id: str,
        *,
        clip: CellBudget | None = None,
    ) -> Rows:
        """Run one statement read-only and return at most `limit` rows.

        Args:
            sql: The statement. With `params` None it is sent exactly as given; otherwise it
                names parameters `:name` and goes through SQLAlchemy's `text()`.
            params: Bind parameters, or None.
            limit: Rows to return; one more is fetched to tell whether more exist.
            timeout_s: Deadline for the database work.
            call_id: Shown to the database (application_name / comment) and in the log.
            clip: Clip cells inside the SQL sent (`mcpkit.sql.clipping`), so no cell over the
                budget reaches the driver; a clipped cell comes back as `Clipped`/`BinarySize`.

        Returns:
            The rows.
        """
        clipping = hooks(self.dialect) if clip is not None and params is None else None
        started = time.perf_counter()
        with self.session(timeout_s, call_id) as (conn, dbapi):
            if clipping is not None and clip is not None:
                describe, wrap = clipping
                plan = wrap(sql, describe(dbapi, sql), limit + 1, clip)
                cursor = dbapi.cursor()
                try:
                    self.profile.run(cursor, plan.sql, call_id)
                    fetched = [plan.reassemble(r) for r in cursor.fetchmany(limit + 1)]
                finally:
                    cursor.close()
                elapsed = time.perf_counter() - started
                columns = tuple(Column(c.name, c.type_name) for c in plan.columns)
                return Rows(columns, tuple(fetched[:limit]), len(fetched) > limit, elapsed, call_id)
            if params is None:
                cursor = dbapi.cursor()
                try:
                    self.profile.run(cursor, sql, call_id)
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
        """Dispose of the SQLAlchemy engine."""
        self._sa.dispose()
