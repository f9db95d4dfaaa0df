"""Re-verification while serving: the start-up proof of the account is repeated when the catalog changes.

A call's session first reads a cheap catalog fingerprint (one query, inside the call's own
read-only session, before the call's SQL), unless another call read it less than
`--catalog-check-interval` seconds ago (default 1 s; 0: every call) and the connection has served
a call before (a new connection always reads it). When it differs from the
fingerprint read with the last passing verification, or the verification is older than
`--reverify-interval` (default 300 s), the whole start-up verification of the engine's identity
runs again in that session before the call's SQL is sent: a role map's isolation
(`mcpkit.sql.rolecheck`), the masks' withholding (`maskcheck.masks_check`) and the order of the
views and functions over them (`maskcheck.order_check`), then the account's
least privilege (`Profile.inspect`, then the refusal of findings no opt-in accepts). A failed
verification fails that engine's calls with one safe sentence (`SOURCE_UNVERIFIED`) and logs the
findings and their fix; it is tried again when the fingerprint changes and at least every few
seconds, and serving resumes when it passes.

With `--mask` (`Guard.watch_masks`) every call reads the fingerprint before its SQL (unless
`--catalog-check-interval` was set) and again after its statement, before its rows are returned
(`Guard.after`): rows read while the catalog moved are discarded (red team rt30 F2).

Fingerprints (what an administrator's change touches; each profile's `catalog_fingerprint`):
- PostgreSQL: row count and sum of `xmin` of the catalogs a grant, a view, a function, a policy, an
  operator, a cast, a type, a role membership, a parameter ACL, a constraint or a partition lives
  in, the attributes of every role the login is a member of (its own included), and the current
  database's owner and ACL;
- MySQL/MariaDB: `SHOW GRANTS` of the account (sorted: the server's order is not stable), and the
  routines (with their bodies, SQL_MODE, parameters and return type, SQL SECURITY and last change:
  LAST_ALTERED alone has one-second resolution) and views (with their definitions: `CREATE OR
  REPLACE VIEW` keeps the rest) it can see, also with each role granted to it enabled in turn;
- SQLite: the schema's own text (`sqlite_master`; the authorizer admits no `schema_version` pragma):
  a new table or view, or a swapped file with another schema, differs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from mcpkit.errors import ToolError
from mcpkit.sql.errors import QueryFailed, SessionLost, SqlConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.engines.engine import SqlEngine

__all__ = [
    "DEFAULT_CATALOG_CHECK_S",
    "DEFAULT_REVERIFY_S",
    "MOVES_RETRIED",
    "CatalogMoved",
    "Guard",
    "Unverified",
    "Verify",
    "account_check",
    "all_of",
    "catalog_checked",
]

log = logging.getLogger("mcpkit.sql")

DEFAULT_REVERIFY_S: Final = 300.0
"""Seconds after which the next call re-runs the whole verification even if nothing changed."""
DEFAULT_CATALOG_CHECK_S: Final = 1.0
"""Seconds during which calls reuse the last fingerprint read instead of reading it again (0: every call)."""
MOVES_RETRIED: Final = 3
"""With masks, times a call runs again after its rows were discarded because the catalog moved while
it ran (`Guard.after`) and the verification passed: a busy database's unrelated catalog writes can
move it more than once in one call (other databases' roles no longer do: `postgres.fingerprint`)."""
_SEEN: Final = "mcpkit.reverify.seen"  # connection info key: this connection's catalog was read
_RETRY_FAILED_S: Final = 5.0  # a failed verification is tried again at most this often (unchanged catalog)
_FORCED: Final = threading.local()


@contextmanager
def catalog_checked() -> Iterator[None]:
    """Every guard this thread meets reads the catalog fingerprint before the call's SQL, in the
    call's transaction, whatever `--catalog-check-interval`: for a call reaching a function whose
    opt-in holds only while its name has one function (red team rt25 F3: an overload created
    while serving ran once within the interval)."""
    _FORCED.on = True
    try:
        yield
    finally:
        _FORCED.on = False


class Unverified(ToolError):
    """The database changed in a way the safety checks refuse: its calls fail until it passes again."""

    code = "SOURCE_UNVERIFIED"

    def __init__(self, call_id: str | None = None) -> None:
        super().__init__(
            "This database is not served right now: it changed in a way this server's safety checks "
            "refuse; the operator log says why. Other databases still answer.",
            retryable=False,
            data={"reason": "unverified", **({"call_id": call_id} if call_id else {})},
        )


class CatalogMoved(Unverified):
    """With masks: the fingerprint read after a call's statement differs from the verified one, and
    the verification passed again; the call's rows are discarded and it may run again
    (`SqlEngine.execute` does, `MOVES_RETRIED` times; elsewhere it answers as a failed verification)."""


Verify = Callable[["SqlEngine", "Connection"], None]


def all_of(*checks: Verify | None) -> Verify:
    """The checks run in order in one session (None: left out); the first to raise fails it."""
    steps = [c for c in checks if c is not None]

    def verify(engine: SqlEngine, conn: Connection) -> None:
        for step in steps:
            step(engine, conn)

    return verify


def account_check(allowed: Collection[str], allow_superuser: bool) -> Verify:
    """The start-up verification of the account (`inspect` and `ensure_safe_account`), as a `Verify`."""
    from mcpkit.sql.checks import ensure_safe_account

    opt_ins = frozenset(allowed)

    def verify(engine: SqlEngine, conn: Connection) -> None:
        report = engine.profile.inspect(conn, engine.url, opt_ins)
        ensure_safe_account(report, allow_superuser=allow_superuser, allow=opt_ins)

    return verify


class Guard:
    """An engine's verification state, checked at the start of every call's session (`SqlEngine.guard`).

    Args:
        verify: Re-runs the start-up verification inside a call's session; raises `SqlConfigError`
            with the findings (and the SQL that fixes them) when the account is no longer safe.
        label: Names the engine in the operator log.
        interval_s: The whole verification runs again at least this often (on the next call).
        verified: The fingerprint read with the start-up verification, if it just passed.
        every_s: `--catalog-check-interval`; None (not set): 1 s, or 0 once masks are watched
            (`watch_masks`).
    """

    def __init__(
        self,
        verify: Verify,
        label: str,
        interval_s: float = DEFAULT_REVERIFY_S,
        verified: str | None = None,
        *,
        every_s: float | None = None,
    ) -> None:
        if interval_s <= 0 or (every_s is not None and every_s < 0):
            raise SqlConfigError(
                "--reverify-interval must be positive and --catalog-check-interval at least 0"
            )
        self.verify, self.label, self.interval_s = verify, label, interval_s
        self.explicit = every_s is not None  # the operator set --catalog-check-interval
        self.every_s = DEFAULT_CATALOG_CHECK_S if every_s is None else every_s
        self.masks = False  # `watch_masks`: each call's rows are checked against the catalog too
        self._read_at = float("-inf")  # when a call last read the fingerprint
        self._fingerprint = verified
        self._at = time.monotonic() if verified is not None else float("-inf")
        self._failed = False
        self._lock = threading.Lock()
        self._paused = threading.local()

    def fresh(self, label: str, verify: Verify | None = None) -> Guard:
        """A guard like this one for another engine (another login or role), not yet verified;
        `verify`: what that engine's start-up verified (default: this guard's checks)."""
        other = Guard(verify or self.verify, label, self.interval_s, every_s=self._every_set())
        other.masks, other.every_s = self.masks, self.every_s
        return other

    def _every_set(self) -> float | None:
        return self.every_s if self.explicit else None

    def first(self, check: Verify) -> None:
        """Run `check` (a start-up check added by an option: masks) before the verification so far,
        whose account check changes the session's search_path, through which masks resolve names."""
        self.verify = all_of(check, self.verify)

    def watch_masks(self, check: Verify) -> None:
        """`first(check)` (the masks' withholding), and from now on every call with masks: the
        fingerprint read before its SQL (unless `--catalog-check-interval` was set) and again after
        it (`after`), before its rows are returned (red team rt30 F2)."""
        self.first(check)
        self.masks = True
        if not self.explicit:
            self.every_s = 0.0
        elif self.every_s > 0:
            log.warning(
                "%s: --mask with --catalog-check-interval %g: a view or function replaced while "
                "serving can be used for that long by calls that failed or timed out (their rows "
                "are still checked after each call); leave the option out to read it before every call",
                self.label,
                self.every_s,
            )

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No check in this thread meanwhile: for the verification itself (`inspect_account`), whose
        findings must come out as its own `SqlConfigError`, not as a refused call."""
        self._paused.on = True
        try:
            yield
        finally:
            self._paused.on = False

    @property
    def failed(self) -> bool:
        """The last verification refused the account."""
        return self._failed

    def _current(self, fp: str | None) -> bool:
        if fp != self._fingerprint:
            return False
        age = time.monotonic() - self._at
        return age < (_RETRY_FAILED_S if self._failed else self.interval_s)

    def due(self, conn: Connection) -> bool:
        """Whether `check` on this connection reads the catalog (a round trip) before the call."""
        if getattr(self._paused, "on", False):
            return False
        if getattr(_FORCED, "on", False):
            return True
        now = time.monotonic()
        info = conn.connection.info  # per database connection: its first call always reads the catalog
        recent = now - self._read_at < self.every_s and now - self._at < self.interval_s
        return self._failed or not recent or not info.get(_SEEN)

    def check(self, engine: SqlEngine, conn: Connection, dbapi: Any, call_id: str) -> None:
        """Before a call's SQL: verify again if the catalog changed or the last proof is old.

        Raises:
            Unverified: the verification refused the account (now or at its last try).
            QueryFailed: reading the catalog left the session changed (`SessionLost`); the
                connection is dropped (a connection failure, retryable).
        """
        if not self.due(conn):
            return  # the catalog was read less than every_s ago: no round trip on this call
        try:
            fp = engine.profile.catalog_fingerprint(dbapi)
            if not self._current(fp):
                with self._lock:
                    if not self._current(fp):
                        self._run(engine, conn, fp, call_id)
        except BaseException as exc:
            # Nothing was verified (the verification itself failed: a database error, the call's
            # deadline): other calls must not skip their read on the strength of this one (rtg N2).
            self._read_at = float("-inf")
            if isinstance(exc, SessionLost):
                log.warning("%s: call %s: %s; dropping the connection", self.label, call_id, exc)
                raise QueryFailed("connection", call_id) from None
            raise
        # a read that matched the verified fingerprint, or a verification that completed
        self._read_at = time.monotonic()
        conn.connection.info[_SEEN] = True
        if self._failed:
            raise Unverified(call_id)

    def after(self, engine: SqlEngine, conn: Connection, dbapi: Any, call_id: str) -> None:
        """With masks, after a call's statement ran and its rows were fetched, before they are
        returned: read the fingerprint again in the same session. Anything the statement used was
        committed before this read (PostgreSQL: a new READ COMMITTED snapshot, the call holding
        its locks; MariaDB: `information_schema` is not transactional, the call holding its
        metadata locks), so a view replaced between the check before the call and its statement
        shows here.

        Raises:
            Unverified: it differs from the verified fingerprint and the verification fails.
            CatalogMoved: it differs and the verification passes again: the rows are discarded.
            QueryFailed: reading the catalog left the session changed (`SessionLost`).
        """
        if not self.masks or getattr(self._paused, "on", False):
            return
        try:
            fp = engine.profile.catalog_fingerprint(dbapi)
            if fp == self._fingerprint and not self._failed:
                return
            with self._lock:
                if fp != self._fingerprint or self._failed:
                    self._run(engine, conn, fp, call_id)
        except BaseException as exc:
            self._read_at = float("-inf")  # the catalog moved and nothing was verified: read it again
            if isinstance(exc, SessionLost):
                log.warning("%s: call %s: %s; dropping the connection", self.label, call_id, exc)
                raise QueryFailed("connection", call_id) from None
            raise
        moved = "%s: call %s: the catalog changed while it ran; its rows are discarded"
        if self._failed:
            log.warning(moved, self.label, call_id)
            raise Unverified(call_id)
        log.info(moved, self.label, call_id)
        raise CatalogMoved(call_id)

    def _run(self, engine: SqlEngine, conn: Connection, fp: str | None, call_id: str) -> None:
        started = time.perf_counter()
        try:
            with engine.profile.undone(conn):  # the checks' own SET LOCALs must not reach the call's SQL
                self.verify(engine, conn)
        except SqlConfigError as exc:
            if not self._failed:
                log.error(
                    "%s: re-verification while serving FAILED (call %s); its calls are refused until "
                    "it passes again: %s",
                    self.label,
                    call_id,
                    exc,
                )
            self._failed = True
        else:
            if self._failed:
                log.warning("%s: re-verification passed again; serving it", self.label)
            self._failed = False
            log.info("%s: verified again in %.0f ms", self.label, (time.perf_counter() - started) * 1000)
        self._fingerprint, self._at = fp, time.monotonic()
