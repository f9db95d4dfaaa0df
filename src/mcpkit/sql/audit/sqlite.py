"""The SQLite audit file's connections: WAL, the sync mode, the busy wait, how appends begin."""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Final

__all__ = ["BUSY_TIMEOUT_S", "sqlite_begin", "sqlite_connect"]

BUSY_TIMEOUT_S: Final = 10.0
"""Longest a connection waits for another's write lock (the audit log's own wait for a call's entry)."""
_WAL_WAIT_S: Final = 0.01


def sqlite_connect(dbapi_connection: Any, sync: str) -> None:
    """Set up a new connection: the busy wait, WAL (`_wal`), `synchronous` (`full` or `normal`)."""
    dbapi_connection.isolation_level = None  # transactions begin in sqlite_begin
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    _wal(cursor)
    cursor.execute(f"PRAGMA synchronous={sync.upper()}")
    cursor.close()


def _wal(cursor: Any) -> None:
    # A file still in rollback mode whose write lock another connection holds (another server
    # switching a new audit file to WAL at the same time) answers "database is locked" at once,
    # without the busy wait: seen as a refused call when two writers first opened one file.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            # the primary code: SQLITE_BUSY_RECOVERY / _SNAPSHOT are busy too
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        time.sleep(_WAL_WAIT_S)


def sqlite_begin(conn: Any) -> None:
    """An append takes the write lock first, so the head it reads is still the head when it inserts.
    Readers (`mcpkit audit`, `--verify`) begin deferred and never hold up a running server (WAL)."""
    immediate = conn.get_execution_options().get("audit_append")
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
