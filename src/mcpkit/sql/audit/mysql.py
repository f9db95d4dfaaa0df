"""The audit store on MySQL/MariaDB: appenders queue on a named lock; durability is a server setting."""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

__all__ = ["RESTART_CODES", "flush_setting", "release_lock", "take_lock"]

RESTART_CODES: Final = (1205, 1213)
"""Lock wait timeout and deadlock: InnoDB says "try restarting transaction"; nothing was written."""


def _name(conn: Connection) -> str:
    # GET_LOCK names are server-wide: one per audit database (at most 64 characters).
    return f"mcpkit_audit:{conn.engine.url.database or ''}"[:64]


def take_lock(conn: Connection) -> None:
    """Wait (60 s at most) for this audit database's append lock.

    Raises:
        OperationalError: the lock did not come.
    """
    if conn.execute(text("SELECT GET_LOCK(:t, 60)"), {"t": _name(conn)}).scalar() != 1:
        raise OperationalError("GET_LOCK", {}, TimeoutError("the audit append lock timed out"))


def release_lock(conn: Connection) -> None:
    """Release it once the entries are committed: the lock belongs to the session, not the
    transaction (a broken connection releases it on its own)."""
    try:
        conn.execute(text("SELECT RELEASE_LOCK(:t)"), {"t": _name(conn)})
        conn.commit()
    except SQLAlchemyError:
        conn.invalidate()


def flush_setting(conn: Connection) -> int:
    """`innodb_flush_log_at_trx_commit`: 1 flushes the log at every commit (what `full` needs)."""
    return int(conn.execute(text("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")).scalar() or 0)
