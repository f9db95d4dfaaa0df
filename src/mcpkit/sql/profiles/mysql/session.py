"""MySQL and MariaDB (pymysql): READ ONLY session and transaction, statement time limit, call id."""

from __future__ import annotations

import importlib
import socket
import weakref
from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy.engine import URL
from sqlglot import exp

from mcpkit.sql.clipping import Clipping
from mcpkit.sql.profiles.base import Outcome, Profile
from mcpkit.sql.profiles.mysql.roles import RoleNotRestored
from mcpkit.sql.profiles.mysql.temp_space import DEFAULT_TMP_DISK_BYTES, sized
from mcpkit.sql.tagging import session_label

__all__ = ["SESSION_MEMORY_BYTES", "MysqlSession"]

# sql_mode flags that change how text is read (quotes, backslashes, `||`): pinned off so the
# server reads regenerated SQL the way sqlglot wrote it.
_UNPINNED_MODES: Final = frozenset({"ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT", "ANSI"})
_COM_RESET_CONNECTION: Final = 0x1F  # MariaDB 10.2.4+, MySQL 5.7.3+
_GROUP_CONCAT_BYTES: Final = 32 * 1024 * 1024  # as SQLite's MAX_LENGTH; longer ones fail (see run)
SESSION_MEMORY_BYTES: Final = 256 * 1024 * 1024
"""What one call's session may allocate in the MariaDB server (`max_session_mem_used`): a derived
table of twenty 16 MB columns took 860 MB without it. Past it the statement fails (1290)."""
# ORDER BY and window ORDER BY compare strings on their first max_sort_length bytes only (1024 by
# default), silently: values equal that far come back in scan order. Each call raises it as far
# as the server's sort_buffer_size lets a sort keep 8 such keys: MariaDB refuses a sort whose keys
# (each up to max_sort_length for a LONGTEXT, JSON or GROUP_CONCAT value) times 15 exceed the
# buffer (1038), so its maximum, 8 MiB, failed every ORDER BY on a JSON column (docs/security.md).
_SORT_KEYS: Final = 8 * 16  # long keys a sort keeps x MariaDB's MERGEBUFF2 (15), rounded up
_SORT_BYTES: Final = (1024, 8 * 1024 * 1024)  # max_sort_length's default and maximum
# Warnings that mean the answer is wrong, not merely imprecise: the server cut a GROUP_CONCAT at
# group_concat_max_len (1260), or answered NULL for a string over max_allowed_packet (1301); or a
# conversion answered a made-up value: out of range (1264), an incorrect or truncated value ('12abc'
# as 12, '2023-02-30' as NULL: 1292, 1366, 1411), an invalid character string (1300, 1977), division
# by zero (1365), a datetime overflow (1441), an integer overflow (1916), a JSON_TABLE column cut or
# zeroed to fit its type (1265), JSON nested past 32 levels answered as NULL or invalid (4040), a
# regular expression stopped by PCRE's match limit and answered as no match (1139: REGEXP 0,
# REGEXP_REPLACE its input unchanged), SFORMAT's NULL for a bad format or argument (4183; SFORMAT is
# left out of the function table, allowable by name). None turns into an error in a SELECT in any
# sql_mode, so `run` turns them into one. Documented NULL answers (a bad JSON or base64 argument)
# and notes stay answers.
# 1265 and 1292 as a Note (not a Warning) are rounding: a decimal to its scale, a datetime to
# microseconds. An overflow (1916) is a Note too, and a made-up value.
_WARNED: Final = "a warning made the answer wrong"
# The server keeps the first max_error_count warnings (64 by default) and the protocol counts up to
# 65535: 64 harmless notes hid a wrong-answer warning behind them ('12abc' answered as 12). Each
# session keeps the most it can, and a call with more warnings than were kept fails (_UNREAD).
_WARNINGS_KEPT: Final = 65535
_UNREAD: Final = -1
_ROUNDING: Final = frozenset({1265, 1292})
_WRONG_ANSWER: Final = frozenset(
    {_UNREAD, 1139, 1260, 1265, 1301, 1264, 1292, 1300, 1365, 1366, 1411, 1441, 1916, 1977, 4040, 4183}
)
_CODES: Final[dict[int, Outcome]] = {
    1064: "syntax",
    1149: "syntax",
    1055: "syntax",  # ONLY_FULL_GROUP_BY: a column neither grouped nor aggregated
    1140: "syntax",  # ONLY_FULL_GROUP_BY: an aggregate beside a bare column without GROUP BY
    1146: "undefined_object",
    1054: "undefined_object",
    1305: "undefined_object",
    1049: "undefined_object",
    1109: "undefined_object",
    1243: "undefined_object",  # unknown prepared statement
    1142: "permission",
    1143: "permission",
    1044: "permission",
    1227: "permission",
    1370: "permission",
    1356: "permission",  # a view whose definer or invoker lacks a right (or a broken view)
    1045: "permission",
    1792: "read_only",
    1290: "read_only",
    1836: "read_only",
    3024: "timeout",
    1969: "timeout",
    1317: "timeout",
    1365: "data",
    1292: "data",
    1366: "data",
    1264: "data",
    1300: "data",
    1411: "data",
    1441: "data",
    1916: "data",
    1977: "data",
    1265: "data",
    4040: "data",
    4183: "data",  # raised by `run`: SFORMAT answered NULL for its format or argument
    1114: "resource",
    1203: "resource",  # the global max_user_connections reached
    1226: "resource",  # the login's MAX_USER_CONNECTIONS reached (docs/security.md)
    1260: "resource",  # raised by `run`: GROUP_CONCAT cut at group_concat_max_len
    1301: "resource",  # raised by `run`: a result over max_allowed_packet came back as NULL
    1139: "resource",  # raised by `run`: a regular expression stopped at PCRE's match limit
    _UNREAD: "resource",  # raised by `run`: more warnings than the server kept to be checked
    1041: "resource",
    1038: "resource",
    1206: "resource",
    3015: "resource",
    2003: "connection",
    2006: "connection",
    2013: "connection",
}


class MysqlSession(Profile):
    """Each call: session and transaction READ ONLY, a statement time limit, a call-id comment.

    `SET SESSION TRANSACTION READ ONLY` matters: DDL commits the open transaction implicitly and
    would then run outside it; with the session read-only the next transaction is read-only too.
    pymysql sends one statement per call (no MULTI_STATEMENTS flag).
    """

    name = "MySQL/MariaDB"
    read_only_enforced = True
    poolable = True

    def __init__(self) -> None:
        super().__init__("mysql")
        self.mariadb: bool | None = None
        # connection -> (pinned sql_mode, MariaDB?, max_sort_length, CURRENT_ROLE() as connected),
        # read once per connection
        self._pinned: weakref.WeakKeyDictionary[Any, tuple[str, bool, int, str | None]] = (
            weakref.WeakKeyDictionary()
        )
        # With masks: a bare column beside GROUP BY takes the first scanned row's value, and an
        # index on a masked column orders that scan; ONLY_FULL_GROUP_BY makes the server refuse it.
        self.full_group_by = False

    def engine_options(self, url: URL) -> dict[str, Any]:
        """Connect and read timeouts."""
        return {"connect_args": {"connect_timeout": 10}}

    def begin(self, dbapi: Any, timeout_s: float, call_id: str) -> None:
        """Make the session read-only, pin sql_mode, arm the time limit, start a read-only transaction.

        First the login's database is selected again: the server re-reads the login's privileges
        on it then, so a REVOKE on the database reaches a pooled connection at its next call (as
        it reaches a `USE`). Then one SET of every session variable and START TRANSACTION READ
        ONLY. The server's flavour, the pinned sql_mode and the sort buffer are read once per
        connection (the pool's reset puts the session back to the global values, which the next
        SET overrides).
        """
        if getattr(dbapi, "db", None):
            dbapi.select_db(dbapi.db)
        pinned = self._pinned.get(dbapi)
        with dbapi.cursor() as cur:
            if pinned is None:
                cur.execute(
                    "SELECT @@SESSION.sql_mode, @@version, @@SESSION.sort_buffer_size, CURRENT_ROLE()"
                )
                mode, version, buffer, role = cur.fetchone()
                mariadb = "mariadb" in str(version).lower()
                kept = ",".join(m for m in str(mode).split(",") if m and m.upper() not in _UNPINNED_MODES)
                sort = min(max(int(buffer) // _SORT_KEYS, _SORT_BYTES[0]), _SORT_BYTES[1])
                pinned = self._pinned[dbapi] = (kept, mariadb, sort, role)
            kept, self.mariadb, sort, _ = pinned
            if self.full_group_by and "ONLY_FULL_GROUP_BY" not in kept.upper().split(","):
                kept = ",".join(m for m in (kept, "ONLY_FULL_GROUP_BY") if m)
            if self.mariadb:
                # max_recursive_iterations truncates silently (warning 1931, COUNT(*) = 1001 as if
                # it were the answer): lift it, so an endless recursion ends in the time limit or
                # the temporary-table cap, errors the agent sees.
                cur.execute(
                    "SET SESSION tx_read_only = 1, sql_mode = %s, max_statement_time = %s,"
                    " max_recursive_iterations = 4294967295, tmp_disk_table_size = %s,"
                    " group_concat_max_len = %s, max_sort_length = %s, max_session_mem_used = %s,"
                    " max_error_count = %s",
                    [
                        kept,
                        max(0.001, timeout_s),
                        DEFAULT_TMP_DISK_BYTES,
                        _GROUP_CONCAT_BYTES,
                        sort,
                        SESSION_MEMORY_BYTES,
                        _WARNINGS_KEPT,
                    ],
                )
            else:
                cur.execute(
                    "SET SESSION transaction_read_only = 1, sql_mode = %s, max_execution_time = %s,"
                    " group_concat_max_len = %s, max_sort_length = %s, max_error_count = %s",
                    [kept, max(1, int(timeout_s * 1000)), _GROUP_CONCAT_BYTES, sort, _WARNINGS_KEPT],
                )
            cur.execute("START TRANSACTION READ ONLY")

    def run(self, cursor: Any, sql: str, call_id: str, tree: exp.Expr | None = None) -> None:
        """Run one statement with the call's tag as a leading comment (visible in the process list);
        a warning that the answer was cut or nulled by a server limit fails the call.

        pymysql's default cursor reads the whole result during `execute`, so the warning count
        is final here. The tag holds only `[A-Za-z0-9._@+:= -]` (`mcpkit.sql.tagging`): it
        cannot end the comment.
        """
        tag = f"/* {session_label(call_id)} */ "
        cursor.execute(tag + (sized(cursor, sql, tag, tree) if self.mariadb else sql))
        count = getattr(cursor, "warning_count", 0) & 0xFFFF  # pymysql reads it as a signed short
        if count:
            with cursor.connection.cursor() as warnings:
                warnings.execute("SHOW WARNINGS")
                rows = warnings.fetchall()
                codes = {int(c) for level, c, _ in rows if not (level == "Note" and int(c) in _ROUNDING)}
            if len(rows) < count or len(rows) >= _WARNINGS_KEPT:
                codes.add(_UNREAD)  # the server kept only the first ones: a later one may be wrong
            # a warning of its own first: past the kept ones (_UNREAD) is only "there were more"
            # (red team rtC L2: `name = 1` over 70,000 rows answered the resource sentence)
            for code in sorted(codes & _WRONG_ANSWER, key=lambda c: (c == _UNREAD, c)):
                pymysql: Any = importlib.import_module("pymysql")
                raise pymysql.err.OperationalError(code, _WARNED)

    def type_names(self, dbapi: Any, description: Sequence[Any]) -> list[str | None]:
        """pymysql field type codes as names (BLOB, JSON, VAR_STRING, ...)."""
        field_type = importlib.import_module("pymysql.constants.FIELD_TYPE")  # pymysql ships no stubs
        by_code = {v: k for k, v in vars(field_type).items() if k.isupper() and isinstance(v, int)}
        return [by_code.get(col[1]) for col in description]

    def interrupt(self, dbapi: Any, url: URL) -> None:
        """`KILL CONNECTION` the connection's thread from a second connection.

        The watchdog fires only when `max_statement_time` did not stop the statement: MariaDB's
        string searches (REPLACE, LOCATE, LIKE) check no kill flag, so `KILL QUERY` would leave the
        call waiting until they end; killing the connection shuts its socket at once and the call
        answers its timeout (the connection is never reused after an interrupt). The statement
        itself runs on in the server until the function returns (docs/security.md).
        """
        pymysql: Any = importlib.import_module("pymysql")
        thread = dbapi.thread_id()
        try:
            killer = pymysql.connect(
                host=url.host or "localhost",
                port=url.port or 3306,
                user=url.username or "",
                password=url.password or "",
                connect_timeout=5,
            )
        except pymysql.err.OperationalError:
            # The login is at its MAX_USER_CONNECTIONS (runaway statements hold its connections):
            # shut the socket from this side, so the call answers now; the server ends the
            # statement at its first kill check (max_statement_time has already flagged it).
            sock = getattr(dbapi, "_sock", None)
            if sock is None:
                raise
            sock.shutdown(socket.SHUT_RDWR)
            return
        try:
            with killer.cursor() as cur:
                cur.execute("KILL CONNECTION %s", [thread])
        finally:
            killer.close()

    def clipping(self) -> Clipping:
        """`clipping.mysql`."""
        from mcpkit.sql.clipping import mysql

        return Clipping(mysql.describe, mysql.wrap)

    def end(self, dbapi: Any) -> None:
        """Roll back."""
        dbapi.rollback()

    def reset(self, dbapi: Any, url: URL) -> None:
        """`COM_RESET_CONNECTION`, then the login's database and autocommit mode again.

        The reset rolls back and drops what a rollback leaves: user variables (`@x`), GET_LOCK
        locks, temporary tables, PREPAREd statements, session variables (back to the global
        values; the character set stays the handshake's). It keeps the current database, so a
        `USE other` is undone by selecting the login's database again (or, with none in the URL,
        the connection is dropped if one was chosen). pymysql has no public call for this
        protocol command; `_execute_command` is what its own `ping` uses.

        The reset keeps the session's role too, and MariaDB lets an INVOKER stored function run
        `SET ROLE`: a role other than the one the connection started with fails the reset, so the
        connection is closed, never reused (red team my11 F8).
        """
        dbapi._execute_command(_COM_RESET_CONNECTION, b"")
        dbapi._read_ok_packet()
        if url.database:
            dbapi.select_db(url.database)
        with dbapi.cursor() as cur:
            cur.execute("SELECT CURRENT_ROLE(), DATABASE()")
            role, database = cur.fetchone()
        if not url.database and database is not None:
            raise RuntimeError("a database was selected on a connection that had none")
        pinned = self._pinned.get(dbapi)
        if pinned is not None and role != pinned[3]:
            raise RoleNotRestored(f"the session's role is {role!r}, not {pinned[3]!r} as it connected")
        dbapi.autocommit(False)

    def classify(self, exc: BaseException) -> Outcome:
        """Map a MySQL error code to a failure kind."""
        args = getattr(exc, "args", ())
        code = args[0] if args and isinstance(args[0], int) else None
        if code is None:
            return "other"
        if code == 1290 and "max-session-mem-used" in str(args[1:2]):
            return "resource"  # the session's memory cap, not a read-only refusal
        if code == 1139 and args[1:2] != (_WARNED,):
            return "syntax"  # the server's own 1139: a regular expression that does not compile
        if self.bounded(exc):
            return "resource"
        return _CODES.get(code, "other")

    def bound_marker(self, exc: BaseException, marker: str) -> bool:
        """Error 1690 from the overflow a guard writes: its text quotes the marker."""
        args: tuple[object, ...] = tuple(getattr(exc, "args", ()))
        return len(args) > 1 and args[0] == 1690 and f"'{marker}'" in str(args[1])
