"""SQLite: opened `mode=ro` with `query_only`, an authorizer that admits reads only, a real deadline."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection

from mcpkit.sql.admission.functions import DENYLISTS, matches
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import AccountReport, Outcome, Profile

__all__ = ["SqliteProfile"]

# Pragmas with no side effects (the ones SQLite also offers as table-valued functions).
_READ_PRAGMAS: Final = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "collation_list",
        "function_list",
        "module_list",
        "pragma_list",
        "database_list",
        "compile_options",
    }
)
_SCHEMA_TABLES: Final = frozenset(
    {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"}
)
_PROGRESS_STEPS: Final = 1000


def _authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
    # Default deny: reads, selects, recursive CTEs and functions off the denylist only.
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return (
            sqlite3.SQLITE_DENY if matches((arg2 or "").lower(), DENYLISTS["sqlite"]) else sqlite3.SQLITE_OK
        )
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in _SCHEMA_TABLES:
        # SQLite reports this when it loads an eponymous virtual table (json_each, pragma_*);
        # nothing can write the schema: the file is open read-only and query_only is on.
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class SqliteProfile(Profile):
    """Each call: the file opened read-only by SQLite itself, writes and ATTACH denied, a deadline.

    The deadline is a progress handler that aborts the VM (`interrupted`) once time is up, so a
    runaway recursive CTE stops inside SQLite, not after it. SQLite has no accounts: the process
    reads the file, opened `mode=ro`.
    """

    name = "SQLite"
    read_only_enforced = True
    has_accounts = False
    forever_sql = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"

    def __init__(self) -> None:
        super().__init__("sqlite")

    def engine_options(self, url: URL) -> dict[str, Any]:
        """A creator that opens the file with `mode=ro` and turns `query_only` on."""
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            raise SqlConfigError("SQLite needs a database file path: sqlite:///path/to/file.db")
        path = Path(database).expanduser().resolve()
        if not path.is_file():
            raise SqlConfigError("The SQLite database file does not exist.")
        uri = f"file:{quote(str(path))}?mode=ro"

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=5.0)
            conn.execute("PRAGMA query_only = 1")
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            return conn

        creator: Callable[[], sqlite3.Connection] = connect
        return {"creator": creator}

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Install the authorizer and the deadline."""
        deadline = time.monotonic() + timeout_s
        dbapi.set_authorizer(_authorizer)
        dbapi.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_STEPS)

    def run(self, cursor: Any, sql: str, call_id: str) -> None:
        """Run one statement (sqlite3 refuses a second one)."""
        cursor.execute(sql)

    def type_names(self, dbapi: Any, description: Sequence[Any]) -> list[str | None]:
        """SQLite results carry no column types."""
        return [None for _ in description]

    def interrupt(self, dbapi: Any, url: URL) -> None:
        """Abort the running statement."""
        dbapi.interrupt()

    def end(self, dbapi: Any) -> None:
        """Remove the handlers and roll back."""
        dbapi.set_progress_handler(None, 0)
        dbapi.set_authorizer(None)
        dbapi.rollback()

    def classify(self, exc: BaseException) -> Outcome:
        """Map sqlite3's message to a failure kind (SQLite has no error codes in Python 3.11's API)."""
        text = str(exc).lower()
        if "interrupted" in text:
            return "timeout"
        if "no such" in text:
            return "undefined_object"
        if "readonly" in text or "read-only" in text or "authoriz" in text or "prohibited" in text:
            return "read_only"  # the authorizer denies everything but reads
        if "access" in text:
            return "permission"
        if (
            "syntax error" in text
            or "incomplete input" in text
            or "bindings" in text
            or "one statement" in text
        ):
            return "syntax"
        if isinstance(exc, sqlite3.DataError | sqlite3.IntegrityError):
            return "data"
        if "too big" in text or "out of memory" in text or "locked" in text or "busy" in text:
            return "resource"
        if "unable to open" in text:
            return "connection"
        return "other"

    def inspect(self, conn: Connection, url: URL) -> AccountReport:
        """The SQLite version and whether this process could write the file (mcpkit never does)."""
        version = str(conn.execute(text("SELECT sqlite_version()")).scalar())
        path = url.database or ""
        writable = ["(the database file; mcpkit opens it read-only)"] if os.access(path, os.W_OK) else []
        return AccountReport("sqlite", version, f"uid {os.getuid()}", False, None, writable)
