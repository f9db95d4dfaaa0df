"""MySQL/MariaDB views and stored functions over masked tables, with their stored SQL.

Which objects `masking.view_order` analyses (red team rt19mask F8): every view whose stored
definition (information_schema.VIEWS) reads a masked table, directly or through other views, in any
database, DEFINER or INVOKER (the scan order is the table's, whoever reads it); and every stored
function the account may execute that the function policy lets queries call and whose body names
such a table or view, or a routine (function or procedure) that does, at any depth. MariaDB shows
a view's definition only to an account holding SHOW VIEW on it (or its definer): a view the
account can select but not read cannot be checked, so it counts (`mcpkit sql grant` grants SHOW
VIEW with every view). A routine's body needs SHOW CREATE ROUTINE the same way (10.11 shows it to
its definer only); a compound body (BEGIN ... END) does not parse, so it counts too, and so does
one stored under an sql_mode that reads text otherwise than the check (`body_modes`, rt30 F4).
A call of any stored function in them counts as a per-row one (`routine_state`: no body is proven
stateless), and a function body over a masked table that reads or assigns a variable counts itself.

A routine runs with its own database as the default: an unqualified `customers` in a function of
`db2` is `db2.customers` (here a view whose `id` is a constant), whatever the connection's database
(red team rt27 F10: `ORDER BY id LIMIT 1` looked total against the connection's table). Each body
reaches the check with its unqualified names qualified by the routine's database (`_in_database`;
a view's stored text is qualified already, and gets the same treatment); a body that does not parse
stays as it is, and then counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlglot.tokenizer_core import TokenType

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.profiles.mysql.body_modes import foreign_routines, readable_body
from mcpkit.sql.profiles.mysql.executable import executable_routines
from mcpkit.sql.profiles.mysql.mask_routes import (
    _SYSTEM,
    _VIEWS,
    _quote,
    _selectable,
    _unquote,
    view_closure,
)
from mcpkit.sql.profiles.mysql.routine_names import mysql_routine_keys
from mcpkit.sql.profiles.mysql.routine_state import ROUTINE_TYPES, mysql_row_order_routines
from mcpkit.sql.profiles.mysql.view_text import read_relations
from mcpkit.sql.profiles.stored import ORDER_FIX, StoredQuery

__all__ = ["mysql_primary_key", "mysql_stored_queries"]

_ROUTINES: Final = (
    "SELECT routine_schema, routine_name, routine_definition, routine_type FROM information_schema.ROUTINES"
    f" WHERE routine_schema NOT IN {_SYSTEM} ORDER BY routine_schema, routine_name"
)
_RETURN: Final = re.compile(r"^\s*RETURN\b(?P<expr>.*)$", re.IGNORECASE | re.DOTALL)
_VARIABLES: Final = (TokenType.PARAMETER, TokenType.SESSION_PARAMETER, TokenType.COLON_EQ)
_PACKAGE: Final = "it is a package whose body reads a masked table, which this check cannot read"
_HIDDEN: Final = "its definition is hidden from the account (no SHOW VIEW), so it cannot be checked"

Relation = tuple[str, str]
# The account sees a key only when it may read each of its columns (MariaDB 10.11 shows none of a
# PRIMARY KEY (id, email) to a reader granted id alone), so a key it sees is whole.
_PRIMARY: Final = (
    "SELECT column_name FROM information_schema.KEY_COLUMN_USAGE WHERE table_schema = :s"
    " AND table_name = :t AND constraint_name = 'PRIMARY' ORDER BY ordinal_position"
)


def mysql_primary_key(conn: Connection, schema: str | None, table: str) -> list[str]:
    """The primary key columns of `schema.table` (the connection's database when None), as the
    account sees them; SHOW CREATE TABLE (SQLAlchemy's inspector) needs more than column grants."""
    schema = schema or str(conn.execute(text("SELECT DATABASE()")).scalar() or "")
    return [str(r[0]) for r in conn.execute(text(_PRIMARY), {"s": schema, "t": table})]


def _over_masked(views: list[tuple[str, str, str, str]], masked: set[Relation]) -> dict[Relation, bool]:
    """Each view that reads a masked table (through other views too) -> whether its definition is
    visible; a hidden one counts (it may)."""

    def reads(key: Relation, definition: str, found: Mapping[Relation, bool]) -> bool | None:
        if not definition or any(r in masked or r in found for r in read_relations(definition, key[0])):
            return bool(definition)
        return None

    return view_closure(views, reads)


def _in_database(statement: str, database: str) -> str:
    """`statement` with each unqualified table name (not a CTE's) qualified by `database`, where the
    server resolves it for a routine or view of that database; as it was when it does not parse or
    names no such table (the check then counts what it cannot parse)."""
    from mcpkit.sql.masking.first_row import cte_for  # masking imports the profiles

    try:
        trees = [t for t in sqlglot.parse(statement, read="mysql") if t is not None]
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return statement
    bare = [
        t
        for tree in trees
        for t in tree.find_all(sqlglot.exp.Table)
        if isinstance(t.this, sqlglot.exp.Identifier) and not t.args.get("db") and cte_for(t) is None
    ]
    if len(trees) != 1 or not bare:
        return statement
    for table in bare:
        table.set("db", sqlglot.exp.to_identifier(database, quoted=True))
    return trees[0].sql(dialect="mysql")


def _unread(flags: str | None, unlisted: bool = False) -> str:
    """Why a function's body cannot be checked: hidden, unlisted, or stored under sql_mode `flags`."""
    if unlisted:
        return (
            "the account may run it (EXECUTE through PUBLIC or a role) but information_schema.ROUTINES"
            " does not list it, so its body cannot be checked"
        )
    if flags:
        return (
            f"its body is stored under sql_mode {flags}, under which the server reads its text otherwise"
            " than this check, so it cannot be checked"
        )
    return "its body is hidden from the account, so it cannot be checked"


def _variables(body: str) -> str | None:
    """Why a function body over a masked table may number its own scan: it reads or assigns a user or
    system variable (`(SELECT id ... WHERE (@c := @c + 1) = 3)` picks the third row it reads)."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("mysql").tokenize(body)
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return None  # the order check reports a body it cannot parse
    if any(t.token_type in _VARIABLES for t in tokens):
        return "its body reads or assigns a user or system variable, which can number the rows it reads"
    return None


def _names(body: str, names: set[str]) -> bool:
    """Whether `body` names one of `names` (a hidden body may name any)."""
    folded = body.casefold()
    return not body or any(re.search(rf"(?<![\w$]){re.escape(n)}(?![\w$])", folded) for n in names)


def mysql_stored_queries(
    conn: Connection, masked: Mapping[str, frozenset[str]], policy: FunctionPolicy | None
) -> list[StoredQuery]:
    """The views and allowed stored functions over masked tables the account can use."""
    user, host = str(conn.execute(text("SELECT CURRENT_USER()")).scalar()).rsplit("@", 1)
    database = str(conn.execute(text("SELECT DATABASE()")).scalar() or "").casefold()
    account = f"'{user}'@'{host}'"
    tables: set[Relation] = set()
    for masked_key in masked:
        db, table = _unquote(masked_key)
        tables.add(((db or database).casefold(), table.casefold()))
    views = [(str(s), str(n), str(t), str(d or "")) for s, n, t, d in conn.execute(text(_VIEWS))]
    over = _over_masked(views, tables)
    out: list[StoredQuery] = []
    for schema, name, _, definition in views:
        key = (schema.casefold(), name.casefold())
        if key not in over:
            continue
        quoted = f"{_quote(schema)}.{_quote(name)}"
        out.append(
            StoredQuery(
                "view",
                schema,
                name,
                (_in_database(definition, schema),) if definition else (),
                f"REVOKE SELECT ON {quoted} FROM {account} (or {ORDER_FIX}; "
                f"GRANT SHOW VIEW ON {quoted} TO {account} lets the check read it)",
                hidden=None if definition else _HIDDEN,
                usable=_selectable(conn, schema, name),
            )
        )
    policy = policy or FunctionPolicy.for_dialect("mysql")
    names = {t for _, t in tables} | {n for _, n in over}
    # a body stored under an sql_mode that reads otherwise counts as hidden (red team rt30 F4)
    foreign = foreign_routines(conn)
    routines = [
        (str(s), str(n), readable_body(foreign, s, n, b), str(t))
        for s, n, b, t in conn.execute(text(_ROUTINES))
    ]
    executable = executable_routines(conn)  # granted through PUBLIC, not listed: hidden (rt35b F1, F4)
    unlisted = {(s, n) for (s, n), r in executable.items() if not r.listed}
    routines += [(s, n, "", executable[(s, n)].kind) for s, n in sorted(unlisted)]
    reading = {(s, n) for s, n, b, _ in routines if _names(b, names)}
    while True:  # a routine that calls (CALL or a function call) one that reads them reads them too
        called = {name.casefold() for _, name in reading}
        more = {(s, n) for s, n, b, _ in routines if _names(b, called)}
        if more <= reading:
            break
        reading |= more
    # Every stored function may number the rows in scan order when a view over a masked table calls
    # it, whatever its label or body (red teams rt27 F5, rt29 F1, rt32 F2). One whose body the check
    # reads itself (a stored function over a masked table) counts there first; one that passes still
    # counts for its callers (`view_order.order_reasons`).
    # A package counts as a whole: `db.pkg.f(...)` shares the package's variables (rt34 F2).
    # Those of the system databases too (rt34 F4), keyed as MariaDB compares names (rt34 F6: `tíck`).
    volatile = mysql_routine_keys(conn, {n for _, n in mysql_row_order_routines(conn, policy)})
    out = [replace(item, volatile=volatile) for item in out]
    for schema, name, body, kind in routines:
        if kind not in ROUTINE_TYPES or (schema, name) not in reading:
            continue
        if kind != "FUNCTION":  # a package body is compound: the check cannot read it
            if not any(o.kind == "function" and (o.schema, o.name) == (schema, name) for o in out):
                usable = policy.reaches(name, schema)
                revoke = f"REVOKE EXECUTE ON PACKAGE {_quote(schema)}.{_quote(name)} FROM {account}"
                out.append(StoredQuery("function", schema, name, (), revoke, hidden=_PACKAGE, usable=usable))
            continue
        key = (schema.casefold(), name.casefold())
        returned = _RETURN.match(body)
        statement = f"SELECT {returned['expr'].strip().rstrip(';')}" if returned else body
        quoted = f"{_quote(schema)}.{_quote(name)}"
        out.append(
            StoredQuery(
                "function",
                schema,
                name,
                (_in_database(statement, schema),) if body else (),  # rt27 F10
                f"REVOKE EXECUTE ON FUNCTION {quoted} FROM {account}",
                hidden=_variables(body) if body else _unread(foreign.get(key), (schema, name) in unlisted),
                # Not on the allowlist: admission refuses calls to it, but a view may call it.
                usable=policy.allows_name(name, schema) or policy.allows_name(name),
                volatile=volatile,
            )
        )
    return out
