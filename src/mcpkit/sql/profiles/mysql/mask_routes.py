"""DEFINER views and routines that read a masked column for the account, in every database.

MariaDB checks a DEFINER view's or routine's tables and columns against its definer, so column
privileges do not hold through one. A route in another database reaches a masked column as well
as one in the connection's database (red team mask13 F4, F7: a view and a function in a twin
database, opted in with `--allow`, answered the e-mails in clear while start-up said ok). A routine
a DEFINER view calls runs with the view definer's rights whatever its own SQL SECURITY (red team
rt22 F1: a DEFINER view over an INVOKER function answered the e-mails), so a view counts as
reading a masked column when it calls, at any depth, a routine whose body reads one or is hidden.

information_schema lists only the columns the account holds a privilege on, so a generated column
over a masked one (`e2 AS (LOWER(email))`), or a foreign-key copy of one, that the account was never
granted is invisible to the check and is not derived as masked (red team rt27 F6: a DEFINER view
reading such a VIRTUAL column, opted in with `--allow view:`, answered the e-mails). So a DEFINER
view whose query the server refuses to prepare as the account (`_blind`: it reads a column or a
relation this account cannot see) counts as reading a masked column: fail closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Final, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.mysql.body_modes import foreign_routines, readable_body
from mcpkit.sql.profiles.mysql.routine_relations import unreadable_relations
from mcpkit.sql.profiles.mysql.view_text import Relation, read_relations, routine_calls, unseen_relations
from mcpkit.sql.profiles.scan_order import split_key

__all__ = ["VIEW_CALLS", "definer_views_left_out", "masked_views", "view_closure"]

_SYSTEM: Final = "('information_schema', 'mysql', 'performance_schema', 'sys')"
_VIEWS: Final = (
    "SELECT table_schema, table_name, security_type, view_definition FROM information_schema.VIEWS"
    f" WHERE table_schema NOT IN {_SYSTEM} ORDER BY table_schema, table_name"
)
# Every relation but a view (listed by _VIEWS): base tables, SYSTEM VERSIONED tables, SEQUENCEs.
_BASE: Final = (
    "SELECT table_schema, table_name FROM information_schema.TABLES"
    f" WHERE table_type <> 'VIEW' AND table_schema NOT IN {_SYSTEM}"
)
# information_schema.ROUTINES lists the routines the account may execute; their bodies only to
# their definer (or with SHOW CREATE ROUTINE), NULL otherwise.
_ROUTINES: Final = (
    "SELECT routine_schema, routine_name, routine_type, definer, routine_definition, security_type"
    f" FROM information_schema.ROUTINES WHERE routine_schema NOT IN {_SYSTEM}"
    " ORDER BY routine_schema, routine_name"
)
# The relations a stored view definition reads and the functions it calls: `view_text` (red team
# rt25 F0: a keyword regex missed the relation after STRAIGHT_JOIN). A stored function call is
# backquoted (qualified outside the view's database) and directly followed by its argument list;
# built-in functions are stored bare (`lcase(...)`); a package routine (sql_mode=ORACLE) is stored
# `db`.`package`.`routine`( (red team rt24 F4).
_NAME: Final = r"`(?:[^`]|``)+`"
_CASE: Final = "SELECT @@lower_case_table_names"

_BLIND: Final = (
    "it reads a column or relation this account cannot see (a generated or foreign-key copy of a masked"
    " column there would be hidden from this check), so it cannot be checked"
)
VIEW_CALLS: Final = (
    "; a DEFINER view that calls it still runs it with the view definer's rights: recreate such a view"
    " SQL SECURITY INVOKER too"
)
"""Appended where a fix turns a routine INVOKER (red team rt22 F1: that was the printed fix)."""

Catalog = tuple[set[Relation], Callable[[str], str]]
"""The relations the account sees, exact, and how the server compares their names."""
T = TypeVar("T")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _unquote(key: str) -> tuple[str | None, str]:
    """`(schema, table)` of a masked table's key (`table`, `schema.table`, `` `schema`.`table` ``)."""
    if not key.startswith("`"):
        return split_key(key)
    parts = [p[1:-1].replace("``", "`") for p in re.findall(_NAME, key)]
    return (parts[0], parts[1]) if len(parts) == 2 else (None, key)


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


def _blind(conn: Connection, views: list[tuple[str, str, str, str]]) -> set[Relation]:
    """The DEFINER views whose query the server refuses to prepare as this account, in the view's
    own database (a function of it is called unqualified): one reads a column or relation the
    account cannot see (a column privilege it lacks; any refusal counts). PREPARE runs nothing."""
    out: set[Relation] = set()
    here = conn.execute(text("SELECT DATABASE()")).scalar()
    now = here
    try:
        for schema, name, security, definition in views:
            if security.upper() == "INVOKER" or not definition:
                continue  # an INVOKER view is prepared with the reader's rights inside the DEFINER one
            try:
                if here is not None and now != schema:  # no database: none to put back, none moved to
                    conn.exec_driver_sql(f"USE {_quote(schema)}")
                    now = schema
                conn.execute(text("PREPARE mcpkit_probe FROM :q"), {"q": definition})
            except DBAPIError:
                out.add((schema.casefold(), name.casefold()))
                continue
            conn.exec_driver_sql("DEALLOCATE PREPARE mcpkit_probe")
    finally:
        if now != here:
            conn.exec_driver_sql(f"USE {_quote(str(here))}")
    return out


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
    catalog: Catalog,
    hidden: Mapping[Relation, set[str]],
    database: str,
    routines: Mapping[Relation, str | None],
    blind: Collection[Relation] = (),
) -> dict[Relation, str]:
    """Each view that reads a masked column (directly, through another such view, through a
    routine it calls that reads one (`routines`: each visible routine -> why it reads one, None),
    or through a relation or routine the check cannot see into), with why. Any name of its
    definition that names a masked table or such a view counts as read (`view_text`)."""
    known, fold = catalog
    schemas = {(s.casefold(), n.casefold()): s for s, n, _, _ in views}

    def shown(relation: Relation) -> str:
        return relation[1] if relation[0] == database else ".".join(relation)

    def why(key: Relation, definition: str, tainted: Mapping[Relation, str]) -> str | None:
        if not definition:
            return "its definition is hidden from the account, so it cannot be checked"
        folded = definition.casefold()
        for relation in read_relations(definition, key[0]):
            if relation in hidden and any(_quote(c) in folded for c in hidden[relation]):
                return "it reads a masked column with its definer's rights"
            if relation in tainted:
                return f"it reads view {shown(relation)}, which reads a masked column"
        for relation in unseen_relations(definition, schemas[key], known, fold):
            return f"it reads {relation[0]}.{relation[1]}, which this check cannot see into"
        for routine in routine_calls(definition, key[0]):
            if routine not in routines:
                return f"it calls {routine[0]}.{routine[1]}, which this check cannot see into"
            if routines[routine] is not None:
                return (
                    f"it calls function {shown(routine)}, which {routines[routine]} (a routine a view"
                    " calls runs with the view definer's rights, whatever its SQL SECURITY)"
                )
        if key in blind:
            return _BLIND
        return None

    return view_closure(views, why)


def _read(name: str | None, flags: str | None = None) -> str:
    if flags:  # its stored sql_mode reads text otherwise (`body_modes`, red team rt30 F4)
        return f"has a body stored under sql_mode {flags}, which this check cannot read as the server does"
    return f"names {name}, which holds a masked column" if name else "has a body hidden from the account"


def _reading_routines(
    routines: list[tuple[str, str, str, str, str, str]],
    names: set[str],
    unreadable: Mapping[Relation, str] | None = None,
    foreign: Mapping[Relation, str] | None = None,
) -> dict[Relation, str | None]:
    """Each routine (schema, name, kind, definer, body, security) -> why it reads a masked column:
    its body names one of `names` (masked tables, views that read one), a relation the account
    cannot read whole (`unreadable`: routine -> why, `routine_relations`; red team rt29 F3), calls
    a routine that does (at any depth), or is hidden (or blanked: stored under the `foreign`
    sql_mode flags, `body_modes`); None if none of these."""
    why: dict[Relation, str | None] = {}
    for schema, name, _, _, body, _ in routines:
        read = _mentions(body, names) if body else None
        key = (schema.casefold(), name.casefold())  # a PACKAGE and its PACKAGE BODY: the worse
        own = (
            _read(read, (foreign or {}).get(key))
            if not body or read is not None
            else (unreadable or {}).get(key)
        )
        why[key] = why.get(key) or own
    while True:
        reading = {k[1] for k, w in why.items() if w is not None}
        more = {
            (s.casefold(), n.casefold()): f"calls {called}, which reads a masked column"
            for s, n, _, _, b, _ in routines
            if why[(s.casefold(), n.casefold())] is None and (called := _mentions(b, reading))
        }
        if not more:
            return why
        why.update(more)


def _mentions(body: str, names: set[str]) -> str | None:
    """The first of `names` a routine body mentions as a word (cheap and conservative)."""
    folded = body.casefold()
    for name in sorted(names):
        if re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", folded):
            return name
    return None


def _taint(
    views: list[tuple[str, str, str, str]],
    catalog: Catalog,
    hidden: Mapping[Relation, set[str]],
    database: str,
    routines: list[tuple[str, str, str, str, str, str]],
    blind: Collection[Relation] = (),
    unreadable: Mapping[Relation, str] | None = None,
    foreign: Mapping[Relation, str] | None = None,
) -> tuple[dict[Relation, str], dict[Relation, str | None]]:
    """Views and routines that read a masked column: a view through a routine it calls, a routine
    through a view it reads, to a fixpoint."""
    tables = {t for _, t in hidden}
    tainted: dict[Relation, str] = {}
    while True:
        reading = _reading_routines(routines, tables | {n for _, n in tainted}, unreadable, foreign)
        again = _tainted_views(views, catalog, hidden, database, reading, blind)
        if again.keys() == tainted.keys():
            return again, reading
        tainted = again


def _read_routes(
    conn: Connection, hidden: Mapping[Relation, set[str]], database: str
) -> tuple[
    list[tuple[str, str, str, str]],
    dict[Relation, str],
    list[tuple[str, str, str, str, str, str]],
    dict[Relation, str | None],
]:
    """The views and routines the account sees, and which of them read a masked column (`_taint`)."""
    views = [(str(s), str(n), str(t), str(d or "")) for s, n, t, d in conn.execute(text(_VIEWS))]
    known = {(str(s), str(n)) for s, n in conn.execute(text(_BASE))} | {(s, n) for s, n, _, _ in views}
    # lower_case_table_names 0: names are case-sensitive, `V` is not the visible `v`
    fold = (lambda name: name) if int(conn.execute(text(_CASE)).scalar() or 0) == 0 else str.lower
    # a body stored under an sql_mode that reads otherwise counts as hidden (red team rt30 F4)
    foreign = foreign_routines(conn)
    routines = [
        (str(s), str(n), str(k), str(d), readable_body(foreign, s, n, b), str(t))
        for s, n, k, d, b, t in conn.execute(text(_ROUTINES))
    ]
    unreadable = unreadable_relations(conn, [(s, n, b) for s, n, _, _, b, _ in routines], known, fold)
    tainted, reading = _taint(
        views, (known, fold), hidden, database, routines, _blind(conn, views), unreadable, foreign
    )
    return views, tainted, routines, reading


def _hidden(
    conn: Connection, masked: Mapping[str, frozenset[str]], database: str
) -> dict[Relation, set[str]]:
    """Masked (database, table) -> its masked columns, case-folded."""
    hidden: dict[Relation, set[str]] = {}
    for key, columns in masked.items():
        schema, table = _unquote(key)
        relation = ((schema or database).casefold(), table.casefold())
        hidden.setdefault(relation, set()).update(c.casefold() for c in columns)
    return hidden


def definer_views_left_out(
    conn: Connection, masked: Mapping[str, frozenset[str]]
) -> list[tuple[str, str, str]]:
    """(database, view, why) of each DEFINER view that reads a masked column, as an administrator
    sees them: `grant --mask` grants no SELECT on them (start-up would refuse them)."""
    database = str(conn.execute(text("SELECT DATABASE()")).scalar() or "").casefold()
    views, tainted, _, _ = _read_routes(conn, _hidden(conn, masked, database), database)
    return [
        (schema, name, tainted[(schema.casefold(), name.casefold())])
        for schema, name, security, _ in views
        if security.upper() != "INVOKER" and (schema.casefold(), name.casefold()) in tainted
    ]


def masked_views(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[Finding]:
    """DEFINER views the account can read and DEFINER routines it can execute, in any database,
    that read a masked column with their definer's rights (one finding each, with its fix).

    A view's stored definition names every column it reads; one over another tainted view, over
    a relation this account cannot see, or calling a routine that reads one (any SQL SECURITY: it
    runs with the view definer's rights), counts as reading one. A routine counts when its body
    names a masked table, a tainted view or such a routine. A definition the account may not read
    (no SHOW VIEW, no SHOW CREATE ROUTINE) cannot be checked and counts too.
    """
    user, host = str(conn.execute(text("SELECT CURRENT_USER()")).scalar()).rsplit("@", 1)
    database = str(conn.execute(text("SELECT DATABASE()")).scalar() or "").casefold()
    account = f"'{user}'@'{host}'"
    hidden = _hidden(conn, masked, database)
    views, tainted, routines, reading = _read_routes(conn, hidden, database)
    findings = []
    for schema, name, security, _ in views:
        reason = tainted.get((schema.casefold(), name.casefold()))
        if reason is None or security.upper() == "INVOKER" or not _selectable(conn, schema, name):
            continue
        quoted = f"{_quote(schema)}.{_quote(name)}"
        see = (
            f"GRANT SELECT on the columns it reads TO {account} lets the check see them"
            if reason == _BLIND or "which this account cannot" in reason  # rt29 F3: routine_relations
            else f"GRANT SHOW VIEW ON {quoted} TO {account} lets the check read it"
        )
        findings.append(
            Finding(
                "masked-column-view",
                f"view {quoted}: {reason}",
                f"REVOKE SELECT ON {quoted} FROM {account} (or recreate it with SQL SECURITY INVOKER; {see})",
            )
        )
    for schema, name, kind, definer, _, security in routines:
        if security.upper() != "DEFINER" or definer.replace("`", "").replace("'", "") == f"{user}@{host}":
            continue  # runs with the account's own rights: its column privileges hold
        why = reading[(schema.casefold(), name.casefold())]
        if why is None:
            continue
        quoted = f"{_quote(schema)}.{_quote(name)}"
        findings.append(
            Finding(
                "masked-column-definer",
                f"{kind.lower()} {quoted} runs as its definer {definer} and {why}",
                f"REVOKE EXECUTE ON {kind.upper()} {quoted} FROM {account} (or recreate it with "
                f"SQL SECURITY INVOKER{VIEW_CALLS})",
            )
        )
    return findings
