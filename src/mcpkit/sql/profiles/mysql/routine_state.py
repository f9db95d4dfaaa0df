"""MySQL/MariaDB stored functions: each counts as a per-row function over masked reads (red teams
rt29, rt31, rt32).

`RETURN (@c := COALESCE(@c, 0) + 1)` under a DETERMINISTIC label (only the routine's claim) numbers
the rows in the order the scan reads them, and over a table with `KEY(email, id)` that order is the
masked e-mail's ranking, through a view or called directly (rt29 F1, F2). Three rounds of red teams
got a counter past every proof of a body's statelessness (rt32 F2: sqlglot reads `len(i)` as
LENGTH, MariaDB calls the stored `len`). So no body is read: every stored function counts, and
only `--allow function-order:DB.N` accepts one.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

__all__ = ["PER_ROW", "mysql_row_order_routines"]

PER_ROW: Final = (
    "it is a stored function, whose value may change from row to row (only --allow function-order:"
    " accepts one over masked reads)"
)
# Every database, `sys` and `mysql` too: root may create a counter there (red team rt34 F4).
_FUNCTIONS: Final = (
    "SELECT routine_schema, routine_name FROM information_schema.ROUTINES WHERE routine_type = 'FUNCTION'"
)


def mysql_row_order_routines(conn: Connection) -> dict[tuple[str, str], str]:
    """Each stored function (database, name as stored) the account can see, with why it counts."""
    return {(str(s), str(n)): PER_ROW for s, n in conn.execute(text(_FUNCTIONS))}
