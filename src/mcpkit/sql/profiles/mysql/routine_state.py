"""MySQL/MariaDB stored functions: each counts as a per-row function over masked reads (red teams
rt29, rt31, rt32).

`RETURN (@c := COALESCE(@c, 0) + 1)` under a DETERMINISTIC label (only the routine's claim) numbers
the rows in the order the scan reads them, and over a table with `KEY(email, id)` that order is the
masked e-mail's ranking, through a view or called directly (rt29 F1, F2). Three rounds of red teams
got a counter past every proof of a body's statelessness (rt32 F2: sqlglot reads `len(i)` as
LENGTH, MariaDB calls the stored `len`). So no body is read: every stored function counts, and
only `--allow function-order:DB.N` accepts one. A package (MariaDB, sql_mode=ORACLE) counts as a
whole: its functions share package-level variables (`cnt := cnt + 1`, rt34 F2) and are called as
`pkg.f(...)` or `db.pkg.f(...)`, so a call through it is a per-row one unless `--allow
function-order:DB.PKG` accepts the package.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["PACKAGE", "PER_ROW", "ROUTINE_TYPES", "mysql_row_order_routines"]

PER_ROW: Final = (
    "it is a stored function, whose value may change from row to row (only --allow function-order:"
    " accepts one over masked reads)"
)
PACKAGE: Final = (
    "it is a package, whose functions may keep state from row to row (only --allow function-order:"
    " on the package accepts calls through it over masked reads)"
)
ROUTINE_TYPES: Final = ("FUNCTION", "PACKAGE", "PACKAGE BODY")
# Every database, `sys` and `mysql` too: root may create a counter there (red team rt34 F4).
_FUNCTIONS: Final = (
    "SELECT routine_schema, routine_name, routine_type FROM information_schema.ROUTINES"
    f" WHERE routine_type IN {ROUTINE_TYPES!r}"
)


def mysql_row_order_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each stored function and package (database, name as stored) the account can see, with why it
    counts."""
    rows = conn.execute(text(_FUNCTIONS))
    return {(str(s), str(n)): PER_ROW if t == "FUNCTION" else PACKAGE for s, n, t in rows}
