"""Where audit entries live: a local SQLite file (WAL) or a table in any SQLAlchemy database.

The table `mcpkit_audit` is created on first use; the store has its own writable connection,
separate from the read-only sessions the SQL tools use. Each row is one chained entry (see
`chain`): `seq` is the primary key, so two processes appending at once cannot both take the same
position; the loser retries on top of the winner. `entry` holds the canonical JSON that is hashed;
the other columns copy parts of it so that filters can use an index, and `verify` checks they agree.

`sync` decides what "written" means before a call goes on:
- `full` (default): the entry is on disk. SQLite fsyncs its WAL at every commit
  (`synchronous=FULL`); PostgreSQL waits for its WAL flush (`synchronous_commit=on`). Survives the
  server process being killed and the machine losing power.
- `normal`: the entry is in the operating system's hands (SQLite WAL `synchronous=NORMAL`,
  PostgreSQL `synchronous_commit=off`). Survives SIGKILL and the OOM killer, not a power cut.
On MySQL/MariaDB durability is the server's `innodb_flush_log_at_trx_commit` (a global setting):
`full` needs it at 1 and the store refuses to open otherwise; `normal` accepts any value. The table
is InnoDB, utf8mb4 (binary collation), the entry a LONGTEXT (a TEXT holds 64 KiB, less than a kept
statement), times to the microsecond, and appenders queue on a named lock (`GET_LOCK`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    create_engine,
    event,
    insert,
    inspect,
    select,
    type_coerce,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import QueuePool

from mcpkit.sql.audit.chain import GENESIS, ChainRow, canonical, link
from mcpkit.sql.audit.mysql import RESTART_CODES, flush_setting, release_lock, take_lock
from mcpkit.sql.audit.record import AuditRecord, kept_name
from mcpkit.sql.audit.sqlite import sqlite_begin, sqlite_connect
from mcpkit.sql.audit.view import escape_text
from mcpkit.sql.dialects import normalize_url
from mcpkit.sql.errors import SqlConfigError

__all__ = ["SYNC_MODES", "TABLE_NAME", "AuditStore", "Sync", "default_audit_path", "open_store"]

TABLE_NAME: Final = "mcpkit_audit"
SYNC_MODES: Final = ("full", "normal")
Sync = Literal["full", "normal"]
_RETRIES: Final = 20
_NOMEM_WAIT_S: Final = 0.1
_START_FIELDS: Final = (
    *("principal", "identity", "source", "client_name", "client_version"),
    *("arguments", "arguments_sha256", "arguments_chars", "statement", "statement_sha256", "statement_chars"),
)
_END_FIELDS: Final = ("sql", "rows", "truncated", "duration_ms", "cached", "reason", "detail")


def _table(metadata: MetaData) -> Table:
    return Table(
        TABLE_NAME,
        metadata,
        Column("seq", Integer, primary_key=True, autoincrement=False),
        Column("kind", String(8), nullable=False),
        Column("call_id", String(64), nullable=False, index=True),
        # naive UTC: portable across stores
        Column(
            "at",
            DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb"),
            nullable=False,
            index=True,
        ),
        Column("tool", String(128), nullable=False, index=True),
        Column("outcome", String(32), index=True),
        Column("entry", Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"), nullable=False),
        Column("prev", String(64), nullable=False),
        Column("hash", String(64), nullable=False),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def _naive_utc(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(tzinfo=None) if at.tzinfo else at


def _columns(entry: dict[str, Any]) -> dict[str, Any]:
    """The indexed copies of an entry's fields (what `verify` compares with the hashed text)."""
    return {
        "kind": str(entry["kind"]),
        "call_id": str(entry["call_id"])[:64],
        "at": _naive_utc(dt.datetime.fromisoformat(entry["at"])),
        # as the text view shows it: NUL and lone surrogates are refused by PostgreSQL / the drivers
        "tool": escape_text(str(entry.get("tool") or ""))[:128],
        "outcome": entry.get("outcome"),
    }


class AuditStore:
    """Append chained entries to, and read calls back from, one SQLAlchemy database.

    Args:
        url: A SQLAlchemy URL (`sqlite:///audit.db`, `postgresql://...`).
        sync: `full` (on disk before a call goes on) or `normal` (with the OS); see the module doc.
    """

    def __init__(self, url: str | URL, *, sync: Sync = "full") -> None:
        if sync not in SYNC_MODES:
            raise SqlConfigError(f"audit sync is one of {', '.join(SYNC_MODES)}, not {sync!r}")
        self.url = normalize_url(url)
        self.sync = sync
        backend = self.url.get_backend_name()
        self.engine: Engine = create_engine(
            self.url,
            poolclass=QueuePool,
            pool_size=1,
            max_overflow=2,
            # the writer thread opens connections; close() may run in another thread
            connect_args={"check_same_thread": False} if backend == "sqlite" else {},
        )
        if backend == "sqlite":
            event.listen(self.engine, "connect", self._sqlite_connect)
            event.listen(self.engine, "begin", sqlite_begin)
        elif backend == "postgresql":
            event.listen(self.engine, "connect", self._pg_connect)
        self.table = _table(MetaData())
        self._created = False

    def _sqlite_connect(self, dbapi_connection: Any, _record: Any) -> None:
        sqlite_connect(dbapi_connection, self.sync)

    def _pg_connect(self, dbapi_connection: Any, _record: Any) -> None:
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET synchronous_commit TO {'on' if self.sync == 'full' else 'off'}")
        dbapi_connection.autocommit = autocommit

    def _ensure(self) -> None:
        if self._created:
            return
        existing = inspect(self.engine)
        if existing.has_table(TABLE_NAME):
            names = {c["name"] for c in existing.get_columns(TABLE_NAME)}
            if not {"seq", "entry", "prev", "hash"} <= names:
                raise SqlConfigError(
                    f"the audit table {TABLE_NAME} at {self.url.render_as_string(hide_password=True)} "
                    "predates the hash-chained format; move it aside (rename the file or table) "
                    "and start again"
                )
        else:
            try:
                with self.engine.connect().execution_options(audit_append=True) as conn, conn.begin():
                    self.table.create(conn, checkfirst=True)
            except SQLAlchemyError:
                # two servers starting at once: the other created it first (MySQL's DDL is not
                # transactional, so checkfirst alone races)
                if not inspect(self.engine).has_table(TABLE_NAME):
                    raise
        self._created = True

    def check(self) -> None:
        """Fail now, with a message for the operator, if the store is unreachable or of an old format.

        Raises:
            SqlConfigError: what is wrong, without the driver's text.
        """
        where = self.url.render_as_string(hide_password=True)
        try:
            self.head()
            flush = self._mysql_flush_setting()
        except SQLAlchemyError as exc:
            raise SqlConfigError(f"cannot open the audit store at {where} ({type(exc).__name__})") from None
        if flush is not None and flush != 1 and self.sync == "full":
            raise SqlConfigError(
                f"the audit store at {where} does not flush its log at each commit "
                f"(innodb_flush_log_at_trx_commit = {flush}): an entry could be lost after the answer; "
                "set it to 1 on that server, or accept that with --audit-sync normal"
            )

    def _mysql_flush_setting(self) -> int | None:
        if self.url.get_backend_name() not in ("mysql", "mariadb"):
            return None
        with self.engine.connect() as conn:
            return flush_setting(conn)

    # --- writing ----------------------------------------------------------------------------------

    def append(self, entries: Sequence[dict[str, Any]]) -> int:
        """Chain and insert entries in one transaction, after whatever is already stored; the last seq.

        Raises:
            SQLAlchemyError: the store failed (the caller decides what a call does then).
        """
        self._ensure()
        texts = [canonical(e) for e in entries]
        for attempt in range(_RETRIES):
            try:
                with self.engine.connect().execution_options(audit_append=True) as conn:
                    try:
                        with conn.begin():
                            seq = self._append(conn, entries, texts)
                    finally:
                        if conn.dialect.name in ("mysql", "mariadb"):
                            release_lock(conn)
                return seq
            except IntegrityError:
                # another process took these positions first: chain onto theirs
                if attempt == _RETRIES - 1:
                    raise
            except OperationalError as exc:
                # InnoDB's "deadlock found, try restarting transaction" (seen while another server
                # created the table) and lock wait timeouts: nothing was written, so try again
                code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
                if code not in RESTART_CODES or attempt == _RETRIES - 1:
                    raise
            except MemoryError:
                # SQLite's process-wide heap limit, reached by a call running at the same time
                # (`mcpkit.sql.profiles.sqlite_heap`): that call fails and frees it; try again
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(_NOMEM_WAIT_S)
        raise AssertionError("unreachable")

    def _append(self, conn: Connection, entries: Sequence[dict[str, Any]], texts: list[str]) -> int:
        # Appenders queue here instead of racing for the next seq: with optimistic retries alone
        # a writer in a tight loop starved the other past every retry.
        if conn.dialect.name == "postgresql":
            conn.execute(sql_text("SELECT pg_advisory_xact_lock(hashtext(:t))"), {"t": TABLE_NAME})
        elif conn.dialect.name in ("mysql", "mariadb"):
            take_lock(conn)
        head = conn.execute(
            select(self.table.c.seq, self.table.c.hash).order_by(self.table.c.seq.desc()).limit(1)
        ).first()
        seq, prev = (int(head[0]), str(head[1])) if head else (0, GENESIS)
        rows = []
        for entry, text in zip(entries, texts, strict=True):
            seq += 1
            digest = link(prev, text)
            rows.append({"seq": seq, **_columns(entry), "entry": text, "prev": prev, "hash": digest})
            prev = digest
        conn.execute(insert(self.table), rows)
        return seq

    # --- reading ----------------------------------------------------------------------------------

    def read(
        self,
        *,
        since: dt.datetime | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        tail: int | None = None,
    ) -> list[AuditRecord]:
        """Calls in the order they started, filtered; `tail` keeps the last N."""
        self._ensure()
        start, end = self.table.alias("s"), self.table.alias("e")
        query = (
            select(start.c.seq, start.c.entry, end.c.entry)
            .select_from(start.outerjoin(end, and_(end.c.call_id == start.c.call_id, end.c.kind == "end")))
            .where(start.c.kind == "start")
        )
        if since is not None:
            query = query.where(start.c.at >= _naive_utc(since))
        if tool:
            query = query.where(start.c.tool == escape_text(kept_name(tool))[:128])
        if outcome and outcome.upper() == "UNFINISHED":
            query = query.where(end.c.seq.is_(None))
        elif outcome:
            query = query.where(end.c.outcome == outcome.upper())
        query = query.order_by(start.c.seq.desc()).limit(tail) if tail else query.order_by(start.c.seq)
        with self.engine.connect() as conn:
            rows = [tuple(r) for r in conn.execute(query)]
        if tail:
            rows.reverse()
        return [_record(int(seq), json.loads(s), json.loads(e) if e else None) for seq, s, e in rows]

    def chain(self) -> Iterator[ChainRow]:
        """Every entry in chain order, with `verify`'s extra check that its columns match its text."""
        self._ensure()
        t = self.table
        query = select(t.c.seq, t.c.prev, t.c.hash, t.c.entry, t.c.kind, t.c.call_id, t.c.tool, t.c.outcome)
        with self.engine.connect() as conn:
            for row in conn.execution_options(yield_per=2000).execute(query.order_by(t.c.seq)):
                yield ChainRow(int(row.seq), str(row.prev), str(row.hash), str(row.entry))

    def mismatched_columns(self) -> list[int]:
        """Entries whose indexed columns differ from their hashed text, or hold what their type cannot."""
        self._ensure()
        t = self.table
        bad = []
        at_raw = type_coerce(t.c.at, String).label("at")  # a driver's datetime, or SQLite's raw text
        query = select(t.c.seq, t.c.entry, t.c.kind, t.c.call_id, t.c.tool, t.c.outcome, at_raw)
        with self.engine.connect() as conn:
            for row in conn.execution_options(yield_per=2000).execute(query.order_by(t.c.seq)):
                try:
                    want = _columns(entry := json.loads(row.entry))
                    at = row.at if isinstance(row.at, dt.datetime) else dt.datetime.fromisoformat(row.at)
                except (ValueError, KeyError, TypeError):
                    bad.append(int(row.seq))
                    continue
                have = {"kind": row.kind, "call_id": row.call_id, "tool": row.tool, "outcome": row.outcome}
                if row.tool == str(entry.get("tool") or "")[:128]:  # written before names were escaped
                    have["tool"] = want["tool"]
                same_at = at.replace(microsecond=0) == want["at"].replace(microsecond=0)
                if have != {k: want[k] for k in have} or not same_at:
                    bad.append(int(row.seq))
        return bad

    def exists(self) -> bool:
        """Whether the audit table is there (reading never creates it)."""
        return self._created or inspect(self.engine).has_table(TABLE_NAME)

    def head(self) -> tuple[int, str]:
        """`(seq, hash)` of the newest entry; `(0, GENESIS)` for an empty log."""
        self._ensure()
        t = self.table
        with self.engine.connect() as conn:
            row = conn.execute(select(t.c.seq, t.c.hash).order_by(t.c.seq.desc()).limit(1)).first()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()


def _time(text: str) -> dt.datetime:
    at = dt.datetime.fromisoformat(text)
    return at.replace(tzinfo=dt.UTC) if at.tzinfo is None else at.astimezone(dt.UTC)


def _record(seq: int, start: dict[str, Any], end: dict[str, Any] | None) -> AuditRecord:
    fields: dict[str, Any] = {k: start.get(k) for k in _START_FIELDS}
    if end is not None:
        fields.update({k: end.get(k) for k in _END_FIELDS})
    return AuditRecord(
        call_id=str(start["call_id"]),
        tool=str(start.get("tool") or ""),
        outcome=str(end.get("outcome") or "INTERNAL") if end else "UNFINISHED",
        at=_time(start["at"]),
        ended_at=_time(end["at"]) if end else None,
        seq=seq,
        **fields,
    )


def default_audit_path() -> Path:
    """Where the audit goes without `--audit`: `$MCPKIT_AUDIT`, else `$XDG_STATE_HOME/mcpkit/audit.db`."""
    explicit = os.environ.get("MCPKIT_AUDIT")
    if explicit:
        return Path(explicit).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "mcpkit" / "audit.db"


def open_store(path: str | Path | None = None, dsn: str | None = None, *, sync: Sync = "full") -> AuditStore:
    """The store for `--audit PATH` (SQLite, the default) or `--audit-dsn URL`.

    >>> open_store(dsn="sqlite:///:memory:").url.get_backend_name()
    'sqlite'

    Raises:
        ValueError: neither or both given.
    """
    if (path is None) == (dsn is None):
        raise ValueError("give exactly one of an audit file path or an audit DSN")
    if dsn is not None:
        return AuditStore(dsn, sync=sync)
    target = Path(path or "").expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    return AuditStore(URL.create("sqlite", database=str(target)), sync=sync)
