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

from typing import TYPE_CHECKING, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.mysql.executable import executable_routines

if TYPE_CHECKING:
    from mcpkit.sql.admission.policy import FunctionPolicy

__all__ = ["PACKAGE", "PER_ROW", "ROUTINE_TYPES", "mysql_row_order_routines"]

PER_ROW: Final = (
    "it is a stored function, whose value may change from row to row (only --allow function-order:"
    " accepts one over masked reads)"
)
PACKAGE: Final = (
    "it is a package, whose functions may keep state from row to row (only --allow function-order:"
    " on the package accepts calls through it over masked reads)"
)
UNLISTED: Final = (
    "; information_schema.ROUTINES does not list it to the account (EXECUTE through PUBLIC or a role),"
    " so its body cannot be read"
)
UNSEEN: Final = (
    "it is a name --allow-function lets calls use, but the account sees no stored function or package"
    " of that name, which a call may still reach"
)
ROUTINE_TYPES: Final = ("FUNCTION", "PACKAGE", "PACKAGE BODY")


def _why(kind: str, listed: bool) -> str:
    return (PER_ROW if kind == "FUNCTION" else PACKAGE) + ("" if listed else UNLISTED)


def _unseen(
    conn: Connection, found: dict[tuple[str, str], str], policy: FunctionPolicy
) -> dict[tuple[str, str], str]:
    """The operator's function names (no pattern, no reviewed built-in) that name none of `found`:
    `db.f` -> (db, f); `db.pkg.f` -> (db, pkg); `f` -> (the connection's database, f)."""
    names = {n.casefold() for _, n in found}
    database: str | None = None
    out: dict[tuple[str, str], str] = {}
    for entry in sorted(policy.only if policy.only is not None else policy.extra):
        parts = entry.split(".")
        if "*" in entry or (len(parts) == 1 and policy.table.lookup(entry) is not None):
            continue
        if len(parts) == 1:
            database = database or str(conn.execute(text("SELECT DATABASE()")).scalar() or "")
            parts = [database, *parts]
        schema, name = parts[0], parts[1] if len(parts) == 3 else parts[-1]
        if name.casefold() not in names and parts[-1].casefold() not in names:
            out[(schema, name)] = UNSEEN
    return out


def mysql_row_order_routines(
    conn: Connection, policy: FunctionPolicy | None = None
) -> dict[tuple[str, str], str]:
    """Each stored function and package (database, name as stored) the account can execute, with why
    it counts; with `policy`, the names it lets calls use that name none of them too (`_unseen`)."""
    found = {key: _why(r.kind, r.listed) for key, r in executable_routines(conn).items()}
    return found | (_unseen(conn, found, policy) if policy is not None else {})
