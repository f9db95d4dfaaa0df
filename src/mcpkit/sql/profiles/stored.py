"""Stored SQL a reader can run without writing it: views and SQL-language functions over masked tables.

A query that names only a view (or calls an allowed SQL function) runs the stored body as it was
written, so the masking analysis of the query never sees a LIMIT, a numbering window or an unordered
`string_agg` inside it, whose answer follows a scan order an index on a masked column may set
(red team rt19mask F8). Each profile that has such objects lists them here (`stored_queries` on the
profile class); `masking.view_order` analyses them at start-up.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from mcpkit.sql.profiles.base import Profile

__all__ = ["ORDER_FIX", "StoredQuery", "order_accepted", "stored_queries"]

ORDER_FIX: Final = "give its LIMIT, window or aggregate an ORDER BY on the primary key"
"""The usual way out of an order finding, in each profile's `revoke`; `StoredQuery.fix` swaps it for
the one a reason needs (a bare column or a DISTINCT's order: `masking.first_scanned.fix_hint`)."""


@dataclass(frozen=True)
class StoredQuery:
    """One view, function or row-level-security policy the reader can use (or that applies to it)
    whose stored SQL reads a masked table.

    Attributes:
        kind: "view" (views and materialized views), "function" or "policy" (PostgreSQL row-level
            security: `name` is TABLE.POLICY, each statement `SELECT 1 FROM table WHERE expression`).
        schema: Its schema (PostgreSQL) or database (MySQL/MariaDB), as stored.
        name: Its name, as stored.
        statements: Its stored SQL (the view's query, the function's statements); empty when the
            account may not read it (`hidden` says why).
        params: Names a function body may use for its arguments (they are not columns).
        revoke: The statement that takes it away from the reader.
        hidden: Why the stored SQL cannot be read or checked (a function's own search_path that
            resolves its names elsewhere, red team rt27 F2), if so.
        usable: Whether the reader can use it (select the view, call the function); a view it cannot
            use still counts for the views over it, which read it with their owner's rights.
        aggregates: The user-defined aggregates of the database (case-folded names): each may
            concatenate its rows in the order they arrive, as `string_agg` does (red team rt21 F6).
        positions: The engine's system columns (case-folded) that tell a row's physical position or
            write order (PostgreSQL's `ctid`, `xmin`, ...): once the table is CLUSTERed on, or loaded
            in the order of, a masked column, they hand its ranking on (red team rt23 F6).
        one_row: A function that returns only the first row of its last query (PostgreSQL's
            non-SETOF SQL functions): that query is read as if it carried `LIMIT 1` (red team rt24 F5).
        volatile: The catalog's functions (lower-cased names) whose value may change from row to
            row in evaluation order (PostgreSQL's VOLATILE ones, MariaDB's NOT DETERMINISTIC
            routines): a call of one in the stored SQL numbers the rows in scan order (red team
            rt27 F4), as the profile's `row_order_functions` do.
        table: A policy's table, as stored (`grant --mask` leaves it out).
    """

    kind: Literal["view", "function", "policy"]
    schema: str
    name: str
    statements: tuple[str, ...]
    revoke: str
    params: frozenset[str] = frozenset()
    hidden: str | None = None
    usable: bool = True
    aggregates: frozenset[str] = frozenset()
    positions: frozenset[str] = frozenset()
    one_row: bool = False
    volatile: frozenset[str] = frozenset()
    table: str | None = None

    def fix(self, hint: str | None) -> str:
        """`revoke`, with `hint` (the way out its finding's reason needs) instead of `ORDER_FIX`."""
        return self.revoke if hint is None else self.revoke.replace(ORDER_FIX, hint)

    @property
    def opt_in(self) -> str:
        """The `--allow` value that accepts it: `view-order:S.N`, `function-order:S.N` or
        `policy-order:S.TABLE.POLICY`."""
        return f"{self.kind}-order:{self.schema}.{self.name}"


def stored_queries(
    profile: Profile, conn: Connection, masked: Mapping[str, frozenset[str]], allow: Collection[str] = ()
) -> list[StoredQuery]:
    """The views and functions over masked tables the current identity can use (none for a profile
    without a `stored_queries` method: SQLite analyses its views itself, `profiles.sqlite_views`).
    A user function whose order `allow` accepts (`function-order:S.N`, each function of its name)
    is no per-row call in them."""
    read = getattr(profile, "stored_queries", None)
    found = list(read(conn, masked)) if read is not None else []
    accepted = _accepted(profile, conn, allow) if found else frozenset()
    return [replace(q, volatile=q.volatile - accepted) for q in found] if accepted else found


def order_accepted(profile: Profile, conn: Connection, allow: Collection[str]) -> frozenset[tuple[str, str]]:
    """(schema, name) of the profile's per-row functions (`row_order_routines`) whose order `--allow
    function-order:` accepts: the profile's own reading of the opt-ins where it has one (PostgreSQL:
    a signature per overload, red team rt35a L1), else `function-order:S.N` itself."""
    if not any(a.startswith("function-order:") for a in allow):
        return frozenset()
    read = getattr(profile, "order_accepted", None)
    if read is not None:
        return frozenset(read(conn, allow))
    found = profile.row_order_routines(conn)
    return frozenset((s, n) for s, n in found if f"function-order:{s}.{n}" in allow)


def _accepted(profile: Profile, conn: Connection, allow: Collection[str]) -> frozenset[str]:
    """Case-folded names whose every user function `--allow function-order:` accepts."""
    accepted = order_accepted(profile, conn, allow)
    if not accepted:
        return frozenset()
    every: dict[str, bool] = {}
    for schema, name in profile.row_order_routines(conn):
        key = name.casefold()
        every[key] = every.get(key, True) and (schema, name) in accepted
    return frozenset(n for n, ok in every.items() if ok)
