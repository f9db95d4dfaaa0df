"""MySQL/MariaDB routine bodies stored under an sql_mode that reads text otherwise than the checks.

A stored routine runs under the sql_mode it was created with (`information_schema.ROUTINES.SQL_MODE`),
not the session's: each call pins ANSI_QUOTES, NO_BACKSLASH_ESCAPES and PIPES_AS_CONCAT off
(`session`), which does not reach a stored body. The checks read a body (`stored`, `mask_routes`) as
the default mode does, so under NO_BACKSLASH_ESCAPES `'a\\' ', id /* ' /* */` read as a string, the
primary key and a comment while the server ran `ORDER BY <constant>`, the masked index order (red
team rt30 F4). So a routine whose stored sql_mode holds any flag not in `READ_ALIKE` (the flags that
leave how text is read as it is: strictness, dates, DDL options, arithmetic) is treated as if its
body were hidden from the account: it counts as reading a masked column and as following the scan
order, which only the masking opt-ins (`function-order:`) accept, not `routine:`.

A view is not concerned: MariaDB stores its query printed back in one canonical form (backquoted
names, `concat(...)` for `||`, `!` for a high-precedence NOT, strings with backslash escapes) and
reads it back with those flags off, whatever the mode it was created under. A trigger body is
only searched for the tables it writes (`profiles.triggers`), which reads the same in every mode.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["READ_ALIKE", "foreign_flags", "foreign_routines", "readable_body"]

READ_ALIKE: Final = frozenset(
    {
        # strictness and dates: what a value is allowed to be, not how the text is read
        "STRICT_TRANS_TABLES",
        "STRICT_ALL_TABLES",
        "TRADITIONAL",
        "NO_ZERO_IN_DATE",
        "NO_ZERO_DATE",
        "ALLOW_INVALID_DATES",
        "ERROR_FOR_DIVISION_BY_ZERO",
        "TIME_ROUND_FRACTIONAL",
        "ONLY_FULL_GROUP_BY",
        # DDL, accounts and SHOW CREATE output
        "NO_AUTO_CREATE_USER",
        "NO_ENGINE_SUBSTITUTION",
        "NO_DIR_IN_CREATE",
        "IGNORE_BAD_TABLE_OPTIONS",
        "NO_KEY_OPTIONS",
        "NO_TABLE_OPTIONS",
        "NO_FIELD_OPTIONS",
        "NO_AUTO_VALUE_ON_ZERO",
        # arithmetic, types and padding of values; UPDATE's assignment order
        "NO_UNSIGNED_SUBTRACTION",
        "REAL_AS_FLOAT",
        "PAD_CHAR_TO_FULL_LENGTH",
        "SIMULTANEOUS_ASSIGNMENT",
    }
)
"""sql_mode flags under which a body's text reads as the checks read it. Every other flag
(NO_BACKSLASH_ESCAPES, ANSI_QUOTES, PIPES_AS_CONCAT, IGNORE_SPACE, HIGH_NOT_PRECEDENCE, ANSI, ORACLE,
MSSQL, DB2, POSTGRESQL, MAXDB, MYSQL323, MYSQL40, EMPTY_STRING_IS_NULL, one unknown) makes the body
unreadable."""

_SYSTEM: Final = "('information_schema', 'mysql', 'performance_schema', 'sys')"
_MODES: Final = (
    "SELECT routine_schema, routine_name, sql_mode FROM information_schema.ROUTINES"
    f" WHERE routine_schema NOT IN {_SYSTEM}"
)


def foreign_flags(sql_mode: str) -> str:
    """The flags of `sql_mode` not in `READ_ALIKE`, comma-separated ('' when it reads alike).

    >>> foreign_flags("STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES"), foreign_flags("STRICT_ALL_TABLES")
    ('NO_BACKSLASH_ESCAPES', '')
    """
    return ",".join(f for f in (s.strip().upper() for s in sql_mode.split(",")) if f and f not in READ_ALIKE)


def foreign_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each routine the account sees whose stored sql_mode reads text otherwise than the checks
    ((database, name), case-folded) -> those flags. A PACKAGE and its PACKAGE BODY share a key:
    either one's flags count."""
    out: dict[tuple[str, str], str] = {}
    for schema, name, mode in conn.execute(text(_MODES)):
        flags = foreign_flags(str(mode or ""))
        if flags:
            out[(str(schema).casefold(), str(name).casefold())] = flags
    return out


def readable_body(foreign: dict[tuple[str, str], str], schema: object, name: object, body: object) -> str:
    """A routine's body as the checks may read it: '' (as if hidden) when `foreign` (from
    `foreign_routines`) holds the routine, or when the account cannot see it (NULL)."""
    if body is None or (str(schema).casefold(), str(name).casefold()) in foreign:
        return ""
    return str(body)
