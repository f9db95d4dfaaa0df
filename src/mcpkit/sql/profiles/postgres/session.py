"""PostgreSQL (psycopg 3): READ ONLY transaction, statement_timeout, application_name = the call's
tag, and the call's end, `DISCARD ALL`'s reset and a fresh random() seed in one message before a
connection is reused."""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from psycopg import adapters as _psycopg_adapters
from psycopg.adapt import AdaptersMap
from psycopg.types.string import TextLoader
from sqlalchemy.engine import URL, Connection
from sqlglot import exp

from mcpkit.sql.clipping import Clipping
from mcpkit.sql.errors import MEMORY_EXCEEDED, SqlConfigError
from mcpkit.sql.profiles.base import Outcome, Profile
from mcpkit.sql.profiles.scan_order import reads_no_mask
from mcpkit.sql.tagging import session_label

__all__ = ["PINNED_SETTINGS", "PostgresSession"]

_UNDEFINED: Final = frozenset({"42P01", "42703", "42883", "42704", "3F000", "3D000", "42P02"})
# One round trip: the read-only transaction and its settings, sent as one simple-protocol message
# (`begin`) or at the head of the call's first pipeline (`begin_statements`). Only integers and the
# sanitised label (`_LABEL_SAFE`) are put into it. No parallel workers: each worker is a process
# with its own RLIMIT_DATA, and a Parallel Hash keeps its table in dynamic shared memory, which no
# process limit counts (red team rt20pg: 2 GB in /dev/shm at work_mem 4MB from one skewed join).
# READ COMMITTED whatever default_transaction_isolation says: the catalog fingerprint read again
# after the call's statement (`reverify.Guard.after`, with masks) must see what committed since
# the transaction began, not its snapshot (under REPEATABLE READ a view replaced between the read
# before the call and its statement was used, and the read after it still saw the old one).
_BEGIN: Final = "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY"
_SETTINGS: Final = (
    "SELECT set_config('statement_timeout', '{ms}', true),"
    " set_config('lock_timeout', '{ms}', true),"
    " set_config('idle_in_transaction_session_timeout', '{idle}', true),"
    " set_config('application_name', '{label}', true),"
    " set_config('standard_conforming_strings', 'on', true),"
    " set_config('max_parallel_workers_per_gather', '0', true),"
    " set_config('default_transaction_read_only', 'on', false)"
)
PINNED_SETTINGS: Final = frozenset(re.findall(r"set_config\('(\w+)'", _SETTINGS)) | {"search_path"}
"""What each call sets (`search_path` where masks pin it): a function's own SET clause of one of
them overrides it while the function runs (`postgres.fnconfig`)."""
_LABEL_SAFE: Final = re.compile(r"[A-Za-z0-9._:@+= -]*")
# One round trip: the call's rollback and what `DISCARD ALL` does, as one simple-protocol message.
# `DISCARD ALL` itself cannot run in a multi-statement message (its statements form an implicit
# transaction block); these are the commands the PostgreSQL manual gives as its equivalent, and
# after the ROLLBACK they run in an implicit transaction of their own that commits at the end.
_RESET_SQL: Final = (
    "ROLLBACK; CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; DEALLOCATE ALL; UNLISTEN *;"
    " SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD TEMP; DISCARD SEQUENCES"
)

# Intervals are read as the text PostgreSQL writes (`1 mon`, `-1 days +02:00:00`): psycopg's
# timedelta counts a month as 30 days and a year as 360, so `1 mon` would read `720:00:00`.
# Arrays of intervals take the element loader from the same map.
_ADAPTERS: Final = AdaptersMap(_psycopg_adapters)
_ADAPTERS.register_loader("interval", TextLoader)


# Sequential and bitmap scans on as well: with them off too (a role's or database's default, careless
# tuning) every path is disabled alike and the cheapest wins, a masked (partial) index's scan among
# them (fix session fixd). A masked call in reach of no masked index keeps its index scans but still
# turns those two on: the re-verification may run in its transaction, and with a role's
# `enable_seqscan = off` its catalog reads took seconds (pincost).
_SCANS_ON: Final = (
    "SELECT set_config('enable_seqscan', 'on', true), set_config('enable_bitmapscan', 'on', true)"
)
_NO_INDEX_SCANS: Final = (
    "SELECT set_config('enable_indexscan', 'off', true), set_config('enable_indexonlyscan', 'off', true),"
    " set_config('enable_seqscan', 'on', true), set_config('enable_bitmapscan', 'on', true)"
)


class PostgresSession(Profile):
    """Each call: `BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY`, local timeouts and identity, the
    query in the extended protocol.

    The query is sent in pipeline mode, which always uses the extended protocol (Parse, Bind,
    Execute of the unnamed statement in one round trip), where the server itself refuses a second
    statement, so `COMMIT; DROP ...` cannot leave the read-only transaction even if admission were
    wrong. No named prepared statement is left for a rollback to deallocate.
    `default_transaction_read_only` is on for the transaction's session too.
    """

    name = "PostgreSQL"
    read_only_enforced = True
    poolable = True
    role_undo: Final = "RESET ROLE"
    """Sent after a role-map call's statement, before the fingerprint is read again (`Guard.after`)."""

    def __init__(self) -> None:
        super().__init__("postgres")
        self._name_path: str | None = None

    def pin_name_path(self, path: Sequence[str]) -> None:
        """Every later call sets `search_path` (locally) to `path`, which masking resolved through."""
        super().pin_name_path(path)
        value = ", ".join('"' + name.replace('"', '""') + '"' for name in path)
        if "\\" in value:  # never inlined where standard_conforming_strings could read it
            raise SqlConfigError("--mask: a schema on the search_path has a backslash in its name")
        self._name_path = "'" + value.replace("'", "''") + "'"

    def engine_options(self, url: URL) -> dict[str, Any]:
        """Connect timeout and the loaders (intervals as text); everything else is per call."""
        return {"connect_args": {"connect_timeout": 10, "context": _ADAPTERS}}

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Start the read-only transaction and set the local timeouts and application_name.

        The connection is in autocommit mode for the call, so psycopg sends no BEGIN of its own:
        the transaction is the explicit `BEGIN ... READ ONLY` sent with the settings in one message.
        """
        dbapi.execute("; ".join(self.begin_statements(dbapi, timeout_s, call_id)))

    def begin_statements(self, dbapi: Any, timeout_s: float, call_id: str) -> list[str]:
        """`BEGIN ... READ ONLY` and the settings, for the caller to send ahead of its first statement."""
        ms = max(1, int(timeout_s * 1000))
        label = session_label(call_id, limit=63, compact=True)  # application_name keeps 63 bytes
        if not _LABEL_SAFE.fullmatch(label):  # session_label guarantees it; never inline otherwise
            label = "mcpkit"
        dbapi.autocommit = True
        statements = [_BEGIN, _SETTINGS.format(ms=ms, idle=ms * 2, label=label)]
        if self._name_path is not None:
            statements.append(f"SELECT set_config('search_path', {self._name_path}, true)")
        if self.index_scans_off:  # an index over a masked column must not order a scan
            statements.append(_SCANS_ON if reads_no_mask() else _NO_INDEX_SCANS)
        return statements

    def run(self, cursor: Any, sql: str, call_id: str, tree: exp.Expr | None = None) -> None:
        """Run one statement through the extended protocol (no parameter processing)."""
        with cursor.connection.pipeline():
            cursor.execute(sql, prepare=False)

    def type_names(self, dbapi: Any, description: Sequence[Any]) -> list[str | None]:
        """Type names from psycopg's registry, else from pg_type (pgvector and other extensions)."""
        oids: list[int | None] = [getattr(col, "type_code", None) for col in description]
        names: dict[int, str] = {}
        unknown = []
        for oid in oids:
            if not isinstance(oid, int):
                continue
            info = dbapi.adapters.types.get(oid)
            if info is not None:
                names[oid] = info.name + ("[]" if info.array_oid == oid else "")
            else:
                unknown.append(oid)
        if unknown:
            with dbapi.cursor() as cur:
                cur.execute(  # qualified: no operator or type on the reader's path answers it
                    "SELECT CAST(oid AS pg_catalog.int4), typname FROM pg_catalog.pg_type"
                    " WHERE oid OPERATOR(pg_catalog.=) ANY(CAST(%s AS pg_catalog.oid[]))",
                    [unknown],
                )
                names.update({int(o): str(n) for o, n in cur.fetchall()})
        return [names.get(o) if isinstance(o, int) else None for o in oids]

    def interrupt(self, dbapi: Any, url: URL) -> None:
        """Send a cancel request for the running statement, then shut the connection's socket.

        The watchdog fires only when `statement_timeout` did not stop the statement, and a cancel
        is the same interrupt: a statement that ignored the one ignores the other (LIKE over a
        long pattern checks for neither while it matches: 23 s past a 1 s timeout, measured on
        15). Shutting the socket answers the call now (the connection is never reused after an
        interrupt); the backend ends when the match returns and it sees the cancel
        (docs/security.md).
        """
        dbapi.cancel_safe(timeout=5.0)
        with socket.socket(fileno=os.dup(dbapi.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)

    def end(self, dbapi: Any) -> None:
        """Roll back the read-only transaction."""
        dbapi.rollback()

    def reset(self, dbapi: Any, url: URL) -> None:
        """Roll back and reset the session as `DISCARD ALL` does, in one message.

        A rollback undoes the transaction's settings, SET ROLE, temporary objects and cursors,
        but not what lives in the session: session advisory locks, PREPAREd statements, the
        sequence cache (`currval`), cached plans. `DISCARD ALL` is `CLOSE ALL; SET SESSION
        AUTHORIZATION DEFAULT; RESET ALL; DEALLOCATE ALL; UNLISTEN *; pg_advisory_unlock_all();
        DISCARD PLANS; DISCARD TEMP; DISCARD SEQUENCES`, which run here after the ROLLBACK in the
        same message. psycopg forgets its own prepared statements when it sees `DEALLOCATE ALL`
        complete. The message is sent with `prepare=False`: it repeats on every call and must
        never become a (single-statement) prepared statement.
        """
        if not dbapi.autocommit:  # a connection SQLAlchemy used (reflection): end its transaction first
            dbapi.rollback()
            dbapi.autocommit = True
        # and random()'s seed, which DISCARD ALL keeps: a seed a call set would make the next
        # call's random() (and sample_table's) predictable
        seed = secrets.randbits(52) / 2**52 * 2 - 1
        dbapi.execute(f"{_RESET_SQL}; SELECT setseed({seed!r})", prepare=False)
        dbapi.autocommit = False  # as SQLAlchemy expects a connection it hands out

    def clipping(self) -> Clipping:
        """`clipping.postgres`, with its one-round-trip `run`."""
        from mcpkit.sql.clipping import postgres

        return Clipping(postgres.describe, postgres.wrap, postgres.run)

    @contextmanager
    def undone(self, conn: Connection) -> Iterator[None]:
        """A savepoint rolled back after the block (the checks' `SET LOCAL search_path`)."""
        conn.exec_driver_sql("SAVEPOINT mcpkit_reverify")
        try:
            yield
        finally:
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT mcpkit_reverify")
            conn.exec_driver_sql("RELEASE SAVEPOINT mcpkit_reverify")

    def failure_message(self, exc: BaseException) -> str | None:
        """`MEMORY_EXCEEDED` for 53200 (the backend's data limit, `postgres.memory`), else the guards'."""
        if getattr(exc, "sqlstate", None) == "53200":
            return MEMORY_EXCEEDED
        return super().failure_message(exc)

    def bound_marker(self, exc: BaseException, marker: str) -> bool:
        """22P02 from the cast a guard writes: its input text starts with the marker."""
        if getattr(exc, "sqlstate", None) != "22P02":
            return False
        diag = getattr(exc, "diag", None)
        primary = getattr(diag, "message_primary", None) or str(exc)
        return f'"{marker} ' in primary

    def classify(self, exc: BaseException) -> Outcome:
        """Map a SQLSTATE to a failure kind."""
        state = getattr(exc, "sqlstate", None) or ""
        if state == "57014":
            return "timeout"
        if state == "25006":
            return "read_only"
        if state in _UNDEFINED:
            return "undefined_object"
        if self.bounded(exc):
            return "resource"
        if state.startswith("42"):
            return "permission" if state == "42501" else "syntax" if state in ("42601", "42P10") else "other"
        if state.startswith("22"):
            return "data"
        if state.startswith(("53", "54")):
            return "resource"
        if state.startswith(("08", "57P")) or (not state and type(exc).__name__ == "OperationalError"):
            return "connection"
        return "other"
