"""DEFINER views and routines that read a masked column for the account, in every database.

MariaDB checks a DEFINER view's or routine's tables and columns against its definer, so column
privileges do not hold through one. A route in another database reaches a masked column as well
as one in the connection's database (red team mask13 F4, F7: a view and a function in a twin
database, opted in with `--allow`, answered the e-mails in clear while start-up said ok).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.scan_order import split_key

__all__ = ["masked_views", "view_closure"]

_SYSTEM: Final = "('information_schema', 'mysql', 'performance_schema', 'sys')"
_VIEWS: Final = (
    "SELECT table_schema, table_name, security_type, view_definition FROM information_schema.VIEWS"
    f" WHERE table_schema NOT IN {_SYSTEM} ORDER BY table_schema, table_name"
)
_BASE: Final = (
    "SELECT table_schema, table_name FROM information_schema.TABLES"
    f" WHERE table_type = 'BASE TABLE' AND table_schema NOT IN {_SYSTEM}"
)
# information_schema.ROUTINES lists the routines the account may execute; their bodies only to
# their definer (or with SHOW CREATE ROUTINE), NULL otherwise.
_ROUTINES: Final = (
    "SELECT routine_schema, routine_name, routine_type, definer, routine_definition"
    f" FROM information_schema.ROUTINES WHERE security_type = 'DEFINER' AND routine_schema NOT IN {_SYSTEM}"
    " ORDER BY routine_schema, routine_name"
)
# The relations a stored view definition reads: MariaDB stores each one backquoted (and qualified)
# after FROM or JOIN; columns may be qualified by an alias, so they are matched by name alone.
_NAME: Final = r"`(?:[^`]|``)+`"
_RELATION: Final = re.compile(rf"\b(?:from|join)\s*[(\s]*({_NAME}(?:\.{_NAME})?)")

Relation = tuple[str, str]
"""`(database, name)`, case-folded."""
T = TypeVar("T")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _unquote(key: str) -> tuple[str | None, str]:
    """`(schema, table)` of a masked table's key (`table`, `schema.table`, `` `schema`.`table` ``)."""
    if not key.startswith("`"):
        return split_key(key)
    parts = [p[1:-1].replace("``", "`") for p in re.findall(_NAME, key)]
    return (parts[0], parts[1]) if len(parts) == 2 else (None, key)


def _relations(definition: str, db: str) -> list[Relation]:
    """`(database, relation)` pairs a view definition reads, case-folded (unqualified: `db`).

    >>> _relations("select `c`.`id` from (`d`.`customers` `c` join `Orders` `o`)", "d")
    [('d', 'customers'), ('d', 'orders')]
    """
    out = []
    for chain in _RELATION.findall(definition.casefold()):
        parts = [p[1:-1].replace("``", "`") for p in re.findall(_NAME, chain)]
        out.append((parts[0], parts[1]) if len(parts) == 2 else (db, parts[0]))
    return out


def _selectable(conn: Connection, schema: str, name: str) -> bool:
    # SHOW VIEW alone lists a view in information_schema; the server says whether it may be read.
    # PREPARE checks the privileges without running anything: even `WHERE 1 = 0` or `LIMIT 0`
    # evaluates a FROM-less DEFINER view's functions (with the definer's rights).
    try:
        conn.execute(
            text("PREPARE mcpkit_probe FROM :q"), {"q": f"SELECT 1 FROM {_quote(schema)}.{_quote(name)}"}
        )
    except DBAPIError:
        return False
    conn.exec_driver_sql("DEALLOCATE PREPARE mcpkit_probe")
    return True


def view_closure(
    views: list[tuple[str, str, str, str]], mark: Callable[[Relation, str, Mapping[Relation, T]], T | None]
) -> dict[Relation, T]:
    """Each view (schema, name, security, definition) that `mark` gives a value, given its key, its
    definition and the views marked so far: to a fixpoint, so a view over a marked view is marked."""
    found: dict[Relation, T] = {}
    changed = True
    while changed:
        changed = False
        for schema, name, _, definition in views:
            key = (schema.casefold(), name.casefold())
            if key in found:
                continue
            value = mark(key, definition, found)
            if value is not None:
                found[key] = value
                changed = True
    return found


def _tainted_views(
    views: list[tuple[str, str, str, str]],
    base: set[Relation],
    hidden: Mapping[Relation, set[str]],
    database: str,
) -> dict[Relation, str]:
    """Each view that reads a masked column (directly, through another such view, or through a
    relation the check cannot see into), with why."""
    known = base | {(s.casefold(), n.casefold()) for s, n, _, _ in views}

    def why(key: Relation, definition: str, tainted: Mapping[Relation, str]) -> str | None:
        if not definition:
            return "its definition is hidden from the account, so it cannot be checked"
        for relation in _relations(definition, key[0]):
            if relation in hidden and any(f"`{c}`" in definition.casefold() for c in hidden[relation]):
                return "it reads a masked column with its definer's rights"
            if relation in tainted:
                shown = relation[1] if relation[0] == database else ".".join(relation)
                return f"it reads view {shown}, which reads a masked column"
            if relation not in known:
                return f"it reads {relation[0]}.{relation[1]}, which this check cannot see into"
        return None

    return view_closure(views, why)


def _mentions(body: str, names: set[str]) -> str | None:
    """The first of `names` a routine body mentions as a word (cheap and conservative)."""
    folded = body.casefold()
    for name in sorted(names):
        if re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", folded):
            return name
    return None


def masked_views(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """DEFINER views the account can read and DEFINER routines it can execute, in any database,
    that read a masked column with their definer's rights (one finding each, with its fix).

    A view's stored definition names every column it reads; one over another tainted view, or over
    a relation this account cannot see, counts as reading one. A routine counts when its body
    names a masked table or a tainted view. A definition the account may not read (no SHOW VIEW,
    no SHOW CREATE ROUTINE) cannot be checked and counts too.
    """
    user, host = str(conn.execute(text("SELECT CURRENT_USER()")).scalar()).rsplit("@", 1)
    database = str(conn.execute(text("SELECT DATABASE()")).scalar() or "").casefold()
    account = f"'{user}'@'{host}'"
    hidden: dict[Relation, set[str]] = {}
    for key, columns in masked.items():
        schema, table = _unquote(key)
        relation = ((schema or database).casefold(), table.casefold())
        hidden.setdefault(relation, set()).update(c.casefold() for c in columns)
    views = [(str(s), str(n), str(t), str(d or "")) for s, n, t, d in conn.execute(text(_VIEWS))]
    base = {(str(s).casefold(), str(n).casefold()) for s, n in conn.execute(text(_BASE))}
    tainted = _tainted_views(views, base, hidden, database)
    findings = []
    for schema, name, security, _ in views:
        reason = tainted.get((schema.casefold(), name.casefold()))
        if reason is None or security.upper() == "INVOKER" or not _selectable(conn, schema, name):
            continue
        quoted = f"{_quote(schema)}.{_quote(name)}"
        findings.append(
            Finding(
                "masked-column-view",
                f"view {quoted}: {reason}",
                f"REVOKE SELECT ON {quoted} FROM {account} (or recreate it with SQL SECURITY INVOKER; "
                f"GRANT SHOW VIEW ON {quoted} TO {account} lets the check read it)",
            )
        )
    names = {t for _, t in hidden} | {n for _, n in tainted}
    for schema, name, kind, definer, body in conn.execute(text(_ROUTINES)):
        if str(definer).replace("`", "").replace("'", "") == f"{user}@{host}":
            continue  # runs with the account's own rights: its column privileges hold
        read = _mentions(str(body), names) if body else None
        if body and read is None:
            continue
        why = f"names {read}, which holds a masked column" if read else "its body is hidden from the account"
        quoted = f"{_quote(str(schema))}.{_quote(str(name))}"
        findings.append(
            Finding(
                "masked-column-definer",
                f"{str(kind).lower()} {quoted} runs as its definer {definer} and {why}",
                f"REVOKE EXECUTE ON {str(kind).upper()} {quoted} FROM {account} (or recreate it with "
                "SQL SECURITY INVOKER)",
            )
        )
    return findings
