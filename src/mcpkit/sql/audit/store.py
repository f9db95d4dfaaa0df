"""Where audit records live: a local SQLite file (WAL) or a table in any SQLAlchemy database.

The table `mcpkit_audit` is created on first use. The store has its own writable connection,
separate from the read-only sessions the SQL tools use.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Final

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    select,
)
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import QueuePool

from mcpkit.sql.audit.record import AuditRecord
from mcpkit.sql.dialects import normalize_url

__all__ = ["TABLE_NAME", "AuditStore", "open_store"]

TABLE_NAME: Final = "mcpkit_audit"
_FIELDS: Final = tuple(f.name for f in fields(AuditRecord))


def _table(metadata: MetaData) -> Table:
    return Table(
        TABLE_NAME,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("call_id", String(64), nullable=False, index=True),
        Column("at", DateTime(), nullable=False, index=True),  # naive UTC: portable across stores
        Column("tool", String(128), nullable=False, index=True),
        Column("outcome", String(32), nullable=False, index=True),
        Column("principal", String(256)),
        Column("identity", String(256)),
        Column("client_name", String(128)),
        Column("client_version", String(64)),
        Column("arguments", Text),
        Column("sql", Text),
        Column("rows", Integer),
        Column("truncated", Boolean),
        Column("duration_ms", Float),
        Column("reason", String(64)),
        Column("detail", Text),
    )


def _sqlite_wal(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def _naive_utc(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(tzinfo=None) if at.tzinfo else at


class AuditStore:
    """Append and read audit records in one SQLAlchemy database.

    Args:
        url: A SQLAlchemy URL (`sqlite:///audit.db`, `postgresql://...`).
    """

    def __init__(self, url: str | URL) -> None:
        self.url = normalize_url(url)
        sqlite = self.url.get_backend_name() == "sqlite"
        self.engine: Engine = create_engine(
            self.url,
            poolclass=QueuePool,
            pool_size=1,
            max_overflow=2,
            # the writer thread opens connections; close() may run in another thread
            connect_args={"check_same_thread": False} if sqlite else {},
        )
        if sqlite:
            event.listen(self.engine, "connect", _sqlite_wal)
        self.table = _table(MetaData())
        self._created = False

    def _ensure(self) -> None:
        if not self._created:
            self.table.create(self.engine, checkfirst=True)
            self._created = True

    def write(self, records: Sequence[AuditRecord]) -> None:
        """Insert records in one transaction."""
        if not records:
            return
        self._ensure()
        rows = []
        for r in records:
            row = {name: getattr(r, name) for name in _FIELDS}
            row["at"] = _naive_utc(r.at)
            row["call_id"] = r.call_id[:64]
            row["tool"] = r.tool[:128]
            rows.append(row)
        with self.engine.begin() as conn:
            conn.execute(insert(self.table), rows)

    def read(
        self,
        *,
        since: dt.datetime | None = None,
        tool: str | None = None,
        outcome: str | None = None,
        tail: int | None = None,
    ) -> list[AuditRecord]:
        """Records in time order, filtered; `tail` keeps the last N."""
        self._ensure()
        t = self.table
        query = select(*(t.c[name] for name in _FIELDS))
        if since is not None:
            query = query.where(t.c.at >= _naive_utc(since))
        if tool:
            query = query.where(t.c.tool == tool)
        if outcome:
            query = query.where(t.c.outcome == outcome.upper())
        query = query.order_by(t.c.id.desc()).limit(tail) if tail else query.order_by(t.c.id)
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        if tail:
            rows.reverse()
        for row in rows:
            row["at"] = row["at"].replace(tzinfo=dt.UTC)
        return [AuditRecord(**row) for row in rows]

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()


def default_audit_path() -> Path:
    """Where the audit goes without `--audit`: `$MCPKIT_AUDIT`, else `$XDG_STATE_HOME/mcpkit/audit.db`."""
    explicit = os.environ.get("MCPKIT_AUDIT")
    if explicit:
        return Path(explicit).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "mcpkit" / "audit.db"


def open_store(path: str | Path | None = None, dsn: str | None = None) -> AuditStore:
    """The store for `--audit PATH` (SQLite, the default) or `--audit-dsn URL`.

    >>> open_store(dsn="sqlite:///:memory:").url.get_backend_name()
    'sqlite'

    Raises:
        ValueError: neither or both given.
    """
    if (path is None) == (dsn is None):
        raise ValueError("give exactly one of an audit file path or an audit DSN")
    if dsn is not None:
        return AuditStore(dsn)
    target = Path(path or "").expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    return AuditStore(URL.create("sqlite", database=str(target)))
