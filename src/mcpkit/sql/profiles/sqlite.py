"""SQLite: opened `mode=ro` with `query_only`, an authorizer that admits reads only, a real deadline."""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from sqlalchemy.engine import URL, Connection
from sqlglot import exp

from mcpkit.sql.admission.function_tables import matches
from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.clipping import Clipping
from mcpkit.sql.clipping import sqlite as clip
from mcpkit.sql.clipping.sqlite import FUNCTIONS as CLIP_FUNCTIONS
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.profiles.base import (
    AccountReport,
    ColumnStats,
    DerivedMask,
    Finding,
    Outcome,
    Profile,
    TableStats,
)
from mcpkit.sql.profiles.digest import catalog_digest
from mcpkit.sql.profiles.sqlite_fts5 import bound_fts5, holds_fts3
from mcpkit.sql.profiles.sqlite_fts_rows import check_fts_rows
from mcpkit.sql.profiles.sqlite_heap import release, reserve
from mcpkit.sql.profiles.sqlite_masks import (
    Withheld,
    exact_ties,
    expression_index_hints,
    generated_columns,
    trigger_hints,
    views_over,
    withheld_for,
)
from mcpkit.sql.profiles.sqlite_scan_pins import sqlite_scan_pins
from mcpkit.sql.profiles.sqlite_text import bound_text_functions, call_deadline, past_deadline
from mcpkit.sql.profiles.sqlite_vec import load_sqlite_vec
from mcpkit.sql.profiles.sqlite_views import view_masks

__all__ = ["MAX_LENGTH", "SqliteProfile", "Withheld"]

log = logging.getLogger("mcpkit.sql")

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
        "data_version",  # read-only; FTS5 reads it whenever it opens a table (MATCH failed without it)
    }
)
# Pragmas that only read but check the whole file in one VM step, out of the deadline's reach: refused
# as a withheld read, not as a change (red team rt35c L5).
_WITHHELD_PRAGMAS: Final = frozenset({"integrity_check", "quick_check", "foreign_key_check"})
_SCHEMA_TABLES: Final = frozenset(
    {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"}
)
_PROGRESS_STEPS: Final = 1000
# Eponymous virtual tables that show the connection's own state rather than the database's:
# sqlite_stmt lists every prepared statement of the connection with its SQL, which on a pooled
# connection would include earlier calls' statements.
_CONNECTION_TABLES: Final = frozenset({"sqlite_stmt"})
# What a connection must look like to be reused: no temporary objects, query_only still on, no
# database but main (and the empty temp). The authorizer denies every way to change these; this
# is the check that it did.
_LEFT_BEHIND: Final = (
    "SELECT (SELECT count(*) FROM temp.sqlite_master), (SELECT query_only FROM pragma_query_only),"
    " (SELECT count(*) FROM pragma_database_list WHERE name NOT IN ('main', 'temp'))"
)
MAX_LENGTH: Final = 32 * 1024 * 1024
"""SQLITE_LIMIT_LENGTH: no string or blob, stored or built, may exceed 32 MiB (the default is 1 GB).
Not lower: SQLite then refuses to read a longer stored value at all (even `length()` or `substr()`)."""
CALL_HEAP: Final = 2 * MAX_LENGTH
"""One call's share of SQLite's heap limit (`sqlite_heap`): issue 10's 64 MB per call. A call may use
more while others use less (`upper()` of one 32 MiB value took 159 MB), never more than the limit."""
_OPERATOR_FUNCTIONS: Final = frozenset({"like", "glob", "regexp", "match", "->", "->>"})  # `x LIKE y`, `->`


def _function_allowed(policy: FunctionPolicy | None) -> Callable[[str], bool]:
    chosen = policy if policy is not None else FunctionPolicy.for_dialect("sqlite")

    def allowed(name: str) -> bool:
        ok = name in _OPERATOR_FUNCTIONS or name in CLIP_FUNCTIONS or chosen.allows_name(name)
        return ok and not matches(name, chosen.deny)

    return allowed


_NOTHING_WITHHELD: Final = Withheld()
_SCHEMA: Final = "SELECT type, name, tbl_name, sql FROM main.sqlite_master ORDER BY type, name"
# Whether the authorizer refused a read in this thread's call (a withheld relation): SQLite says
# "not authorized" for every denial, and a refused read is a permission failure, not a write.
_denied = threading.local()


def _authorizer(allowed: Callable[[str], bool], withheld: Withheld = _NOTHING_WITHHELD) -> Callable[..., int]:
    def authorize(
        action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
    ) -> int:
        # Default deny: reads, selects, recursive CTEs, read-only pragmas and allowed functions only.
        if action == sqlite3.SQLITE_READ:
            answer = (
                sqlite3.SQLITE_DENY
                if (arg1 or "").casefold() in _CONNECTION_TABLES
                else withheld.read(arg1, arg2, trigger)
            )
            if answer == sqlite3.SQLITE_DENY:
                _denied.read = True
            return answer
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if allowed((arg2 or "").lower()):
                return sqlite3.SQLITE_OK
            _denied.read = True  # no write: the call may not run here (FTS3/4's snippet)
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _WITHHELD_PRAGMAS:
            _denied.read = True
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in _SCHEMA_TABLES:
            # SQLite reports this when it loads an eponymous virtual table (json_each, pragma_*);
            # nothing can write the schema: the file is open read-only and query_only is on.
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    return authorize


def _has_vec(dbapi: Any) -> bool:
    # Per connection, not per creator: a pooled connection may predate `use_vectors()`.
    return dbapi.execute("SELECT 1 FROM pragma_function_list WHERE name = 'vec_f32'").fetchone() is not None


class SqliteProfile(Profile):
    """Each call: the file opened read-only by SQLite itself, writes and ATTACH denied, a deadline.

    The deadline is a progress handler that aborts the VM (`interrupted`) once time is up, so a
    runaway recursive CTE stops inside SQLite, not after it. SQLITE_LIMIT_LENGTH caps every string
    and blob at `MAX_LENGTH`, so no single step builds gigabytes (`zeroblob`, `printf`, `replace`);
    SQLite's process-wide heap limit (`sqlite_heap`) bounds what a call holds at once, which fails as
    `resource` past it.
    The authorizer admits reads, read-only pragmas and the function policy's functions; ATTACH is
    capped at 0. SQLite has no accounts: the process reads the file, opened `mode=ro`.
    """

    name = "SQLite"
    read_only_enforced = True
    has_accounts = False
    poolable = True
    vector_kind = "sqlite_vec"
    plan_check = "EXPLAIN QUERY PLAN {}"
    exact_ties = staticmethod(exact_ties)
    namespace_names = frozenset({"main"})
    ordered_aggregates = ordered_object_aggregates = False
    float_sums, float_round, sum_overflows = frozenset({"total"}), True, True  # `masking.sums` (rte)
    bare_columns = True
    # guessable_random stays empty: random()/randomblob() read sqlite3_randomness, ChaCha20 keyed
    # from the OS since 3.40 (the library here holds its "expand 32-byte k" constant).
    extra_errors = (MemoryError,)  # SQLITE_NOMEM at the heap limit
    forever_sql = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"

    def __init__(self) -> None:
        super().__init__("sqlite")
        self._allowed = _function_allowed(None)
        self.withheld = Withheld()
        self.vectors = False

    def use_vectors(self) -> str | None:
        """Load sqlite-vec into every connection (for `similar_rows`), before its first call."""
        if self.vectors:
            return None
        self.vectors = True
        return "SELECT vec_length('[1.0, 2.0]')"

    def use_pool(self, owner: object, pool_size: int) -> None:
        """Count the engine's connections in SQLite's process-wide heap limit (`sqlite_heap`)."""
        reserve(owner, pool_size, CALL_HEAP)

    def release_pool(self, owner: object) -> None:
        """The closed engine's connections leave the heap limit; with the last, SQLite's default."""
        release(owner)

    def use_function_policy(self, policy: FunctionPolicy) -> None:
        """The authorizer refuses, inside SQLite, every function the policy does not admit."""
        super().use_function_policy(policy)
        self._allowed = _function_allowed(policy)
        self.policy_generation += 1

    def catalog_fingerprint(self, dbapi: Any) -> str:
        """The schema's own text (the authorizer admits no `schema_version` pragma): a new table or
        view, or a swapped file with another schema, differs."""
        return catalog_digest(dbapi, _SCHEMA)

    def scan_order_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Keys and indexes over masked columns, expression indexes too (`expression_index_hints`)."""
        return super().scan_order_hints(conn, masked) + expression_index_hints(conn, masked)

    scan_pins = staticmethod(sqlite_scan_pins)  # `NOT INDEXED` where an index reads a masked column

    def trigger_hints(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[str]:
        """Triggers on masked tables (`sqlite_masks.trigger_hints`)."""
        return trigger_hints(conn, masked)

    def derived_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
        """Generated columns computed from masked ones (the authorizer sees only the column read),
        and view columns computed from masked ones (the authorizer could only make them NULL)."""
        out = []
        for table, columns in sorted(masked.items()):
            generated = generated_columns(conn, table, columns)
            if generated:
                out.append(DerivedMask(table, None, table, generated, "generated from a masked column"))
        over = views_over(conn, {t.casefold() for t, cols in masked.items() if cols})
        for view, cols in sorted(view_masks(conn, masked, over).columns.items()):
            out.append(DerivedMask(view, None, view, cols, "a view column computed from a masked column"))
        return out

    def use_masks(self, conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
        """The authorizer reads masked columns as NULL and refuses the shadow tables over them."""
        self.withheld = withheld_for(conn, masked)
        # A connection that already opened a virtual table keeps it open, with what it read then;
        # the engine replaces every pooled connection, so the new policy applies from the start.
        self.policy_generation += 1
        return []

    def withheld_relations(self) -> frozenset[str]:
        """The virtual tables over masked columns and their shadow tables: the authorizer
        refuses them whole (a virtual table cannot even open), so the analysis refuses them first."""
        return self.withheld.tables | self.withheld.virtual

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
            # No statement cache: a cached statement outlives its call on a pooled connection, and
            # SQLite's sqlite_stmt table lists it with its text (the authorizer refuses that table too).
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=5.0, cached_statements=0)
            conn.execute("PRAGMA query_only = 1")
            conn.execute("PRAGMA temp_store = MEMORY")  # sorts and temp tables under the heap limit
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
            bound_text_functions(conn, MAX_LENGTH)
            bound_fts5(conn)
            clip.register(conn)  # the wrapper's one reading of each column
            return conn

        creator: Callable[[], sqlite3.Connection] = connect
        return {"creator": creator}

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Load sqlite-vec once per connection when asked, then install the authorizer and the deadline."""
        if self.vectors and not _has_vec(dbapi):  # before the call's first statement and authorizer
            load_sqlite_vec(dbapi)
        deadline = time.monotonic() + timeout_s
        _denied.read = False
        allowed = self._allowed
        if holds_fts3(dbapi):  # FTS3/4's snippet() runs unbounded in one step
            allowed = lambda name: name != "snippet" and self._allowed(name)  # noqa: E731
        dbapi.set_authorizer(_authorizer(allowed, self.withheld))
        dbapi.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_STEPS)
        call_deadline(deadline)  # the bounded functions' private connection stops at it too

    def run(self, cursor: Any, sql: str, call_id: str, tree: exp.Expr | None = None) -> None:
        """Run one statement (sqlite3 refuses a second one), unless its full-text work overruns."""
        check_fts_rows(cursor.connection, sql, tree, self.withheld_relations())
        cursor.execute(sql)

    def clipping(self) -> Clipping:
        """`clipping.sqlite`."""
        return Clipping(clip.describe, clip.wrap)

    def report_value(self, value: Any) -> Any:
        """Dates as ISO text, as SQLite keeps them."""
        return value.isoformat() if isinstance(value, dt.date) else value

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
        call_deadline(None)
        dbapi.rollback()

    def reset(self, dbapi: Any, url: URL) -> None:
        """Roll back and check that the call left nothing in the connection (else it is closed).

        SQLite's per-connection state is the temp schema, pragmas and attached databases; the
        authorizer refuses every statement that would change them, and this verifies it did.
        """
        self.end(dbapi)
        state = tuple(dbapi.execute(_LEFT_BEHIND).fetchone())
        if state != (0, 1, 0):
            raise RuntimeError(f"the connection kept state (temp objects, query_only, attached): {state}")

    def classify(self, exc: BaseException) -> Outcome:
        """Map sqlite3's message to a failure kind (SQLite has no error codes in Python 3.11's API)."""
        if isinstance(exc, MemoryError):
            return "resource"  # SQLITE_NOMEM: the process-wide heap limit (`sqlite_heap`)
        text = str(exc).lower()
        if "interrupted" in text or (
            ("raised exception" in text or "logic error" in text) and past_deadline()
        ):
            return "timeout"  # the progress handler, or the bounded functions' private connection
        if "no such" in text:
            return "undefined_object"
        if ("authoriz" in text or "prohibited" in text) and getattr(_denied, "read", False):
            return "permission"  # a withheld relation (a masked column's index, sqlite_stmt)
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
        resource = ("too big", "too complex", "raised exception", "out of memory", "locked", "busy")
        if any(t in text for t in resource):
            return "resource"
        if "unable to open" in text:
            return "connection"
        return "other"

    def inspect(self, conn: Connection, url: URL, allowed: frozenset[str] = frozenset()) -> AccountReport:
        """The SQLite version and whether this process could write the file (mcpkit never does)."""
        version = sqlite3.sqlite_version  # the linked library; the authorizer refuses sqlite_version()
        path = url.database or ""
        writable = ["(the database file; mcpkit opens it read-only)"] if os.access(path, os.W_OK) else []
        return AccountReport("sqlite", version, f"uid {os.getuid()}", False, None, writable)

    def table_stats(self, conn: Connection, schema: str | None, table: str) -> TableStats:
        """`sqlite_stat1` (after ANALYZE): the row count and the distinct estimate of each index's
        first column. `sqlite_stat4` holds sampled values and is not read."""
        return sqlite_table_stats(conn, table)


def sqlite_table_stats(conn: Connection, table: str) -> TableStats:
    """Row count and leading-column distinct estimates from `sqlite_stat1`, where ANALYZE wrote it."""
    present = conn.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'"
    ).first()
    if present is None:
        return TableStats()
    rows: int | None = None
    columns: dict[str, ColumnStats] = {}
    for index, stat in conn.exec_driver_sql("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = ?", (table,)):
        numbers = [int(p) for p in str(stat or "").split() if p.isdigit()]
        if not numbers:
            continue
        rows = numbers[0] if rows is None else max(rows, numbers[0])
        if index is None or len(numbers) < 2 or numbers[1] <= 0:
            continue
        first = conn.exec_driver_sql(
            "SELECT name FROM pragma_index_info(?) WHERE seqno = 0", (str(index),)
        ).first()
        if first is not None and first[0] is not None:
            columns[str(first[0])] = ColumnStats(distinct=max(1.0, numbers[0] / numbers[1]))
    return TableStats(rows=rows, columns=columns, source="sqlite_stat1" if rows is not None else "")
