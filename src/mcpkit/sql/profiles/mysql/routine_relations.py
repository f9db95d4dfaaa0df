"""The relations a MariaDB routine body reads that the account cannot read whole (red team rt29 F3).

A routine a DEFINER view calls runs with the view definer's rights (`mask_routes`), so a relation
its body reads that the account cannot see (an INVOKER view over the masked `customers.email`, not
granted to it), or whose every column it cannot read (a foreign-key or generated copy of a masked
column it was never granted), may hand a masked value on while the body names nothing masked the
check can see. PREPARE of the view as the account does not open function bodies. So each relation
a body names is prepared as `SELECT *` as the account: a refusal (an unseen relation, a column it
lacks, an INVOKER view reading one) counts as reading a masked column: fail closed.

Which relations a body names: a body that parses (`RETURN expr` as `SELECT expr`, or one statement)
gives its tables (not its CTEs). A compound body (BEGIN ... END), or one holding what sqlglot reads
otherwise than MariaDB may (`--1`, `#`, `/*!...*/`, `"x"`, a backslash), gives each name after FROM,
any `... JOIN` or UPDATE, and after each comma of that list at its own depth (past a derived
table, an alias, an index hint), read with its comments out (an executable comment's text kept)
twice: strings read with and without backslash escapes (`sql_mode` may hold NO_BACKSLASH_ESCAPES
or ANSI_QUOTES; a quoted name or string is one token either way). Over-approximation is the safe
direction: `TRIM(x FROM s)` names `s`, a CTE of such a body names itself, and each then counts
(one statement's CTE must not hide another's relation). An unqualified name is the routine's
database's. A call to a routine the account cannot see counts the same way (`body_calls`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.mysql.view_text import Relation

__all__ = ["body_calls", "body_relations", "unreadable_relations"]

_RETURN: Final = re.compile(r"^\s*RETURN\b(?P<expr>.*)$", re.IGNORECASE | re.DOTALL)
# sqlglot reads `--1` and `#` as comments, `"x"` as a string and `/*!...*/` as nothing, where
# MariaDB may not: a body holding one of these is read by its relation positions instead.
_UNSURE: Final = re.compile(r"/\*|--|#|\"|\\")
_QUOTED: Final = r"`(?:[^`]|``)*`"
_STRINGS: Final = {
    True: r"'(?:[^'\\]|\\.|'')*'?|\"(?:[^\"\\]|\\.|\"\")*\"?",  # backslash escapes (the default)
    False: r"'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?",  # NO_BACKSLASH_ESCAPES
}
_COMMENTS: Final = r"/\*M?!\d*(?P<run>.*?)(?:\*/|$)|/\*.*?(?:\*/|$)|--(?=[\x00-\x20]|$)[^\n]*|#[^\n]*"
# One token: a quoted name (`"x"` is one under ANSI_QUOTES), a string, a word, one character.
_TOKENS: Final = {
    escapes: re.compile(rf"({_QUOTED}|\"(?:[^\"{b}]|{e}\"\")*\"?)|('(?:[^'{b}]|{e}'')*'?)|([\w$]+)|(\S)")
    for escapes, b, e in ((True, "\\\\", "\\\\.|"), (False, "", ""))
}
_PLACED: Final = re.compile(r"^(?:from|\w*join|update)$", re.IGNORECASE)
# Built-in functions and keywords (`varchar(`, `if(`, `in (`): a call to one reads no stored routine.
# MariaDB lists both (10.6.3+); MySQL 8 lists keywords only: there a built-in call counts (fail closed).
_BUILTINS: Final = (
    "SELECT `function` FROM information_schema.SQL_FUNCTIONS"
    " UNION SELECT word FROM information_schema.KEYWORDS",
    "SELECT word FROM information_schema.KEYWORDS",
)
# Words a relation position may hold that name no relation: a subquery, VALUES, DUAL, LATERAL.
_NOT_RELATIONS: Final = frozenset({"select", "with", "values", "lateral", "dual", "table"})
# Words that end a FROM list at its own depth (commas after them are not relations).
_ENDS: Final = frozenset(
    {"where", "group", "having", "order", "limit", "union", "except", "intersect", "window", "into", "set"}
    | {"then", "do", "end", "returning"}
)


def _unquote(name: str) -> str:
    return name[1:-1].replace(name[0] * 2, name[0]) if name[:1] in '`"' else name


def _parsed(body: str, schema: str) -> list[Relation] | None:
    """The tables of a body that parses as one statement, None when it does not."""
    from mcpkit.sql.masking.first_row import cte_for  # masking imports the profiles

    returned = _RETURN.match(body)
    statement = f"SELECT {returned['expr'].strip().rstrip(';')}" if returned else body
    try:
        trees = [t for t in sqlglot.parse(statement, read="mysql") if t is not None]
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        return None
    if len(trees) != 1 or any(isinstance(n, sqlglot.exp.Command) for n in trees[0].walk()):
        return None
    out: dict[Relation, None] = {}
    for table in trees[0].find_all(sqlglot.exp.Table):
        if not isinstance(table.this, sqlglot.exp.Identifier) or cte_for(table) is not None:
            continue
        out[(table.db or schema, table.name)] = None
    return list(out)


def _uncommented(body: str, escapes: bool) -> str:
    """`body` with its comments blank, an executable one (`/*!50700 ...*/`, `/*M!...*/`) kept as
    text, strings read with or without backslash escapes."""

    def keep(m: re.Match[str]) -> str:
        if m["run"] is not None:
            return f" {m['run']} "
        return m[0] if m[0][:1] in "`'\"" else " "

    return re.sub(rf"{_QUOTED}|{_STRINGS[escapes]}|{_COMMENTS}", keep, body, flags=re.DOTALL)


def _positions(body: str, schema: str, escapes: bool, out: dict[Relation, None]) -> None:
    """Add each name after FROM, any `... JOIN` or UPDATE, and after each comma of its list at
    its own depth (a derived table's parentheses, index hints, aliases between), to `out`."""
    tokens = [(m[1] or m[3], m[0]) for m in _TOKENS[escapes].finditer(body)]
    for start, (word, _) in enumerate(tokens):
        if not word or not _PLACED.match(word):
            continue
        depth, expect, at = 0, True, start + 1
        while at < len(tokens):
            name, raw = tokens[at]
            if expect and raw == "(":
                depth += 1
            elif expect and name:
                parts, at = [name], at + 1
                while at + 1 < len(tokens) and tokens[at][1] == "." and tokens[at + 1][0]:
                    parts.append(tokens[at + 1][0])
                    at += 2
                expect = False
                call = at < len(tokens) and tokens[at][1] == "("
                bare = len(parts) == 1 and parts[0][:1] not in '`"'
                if call or (bare and (parts[0].casefold() in _NOT_RELATIONS or parts[0][0].isdigit())):
                    continue
                names = [_unquote(p) for p in parts[-2:]]
                out[(names[0], names[1]) if len(names) == 2 else (schema, names[0])] = None
                continue
            elif raw == "(":
                depth += 1
            elif raw == ")":
                depth -= 1
                if depth < 0:
                    break
            elif raw == ";" or (depth == 0 and name and name.casefold() in _ENDS):
                break
            elif raw == "," and depth == 0:
                expect = True
            else:
                expect = False
            at += 1


def _placed(body: str, schema: str) -> list[Relation]:
    """Each name in a relation position of a body sqlglot may misread (see the module's doc), read
    with its comments out, strings with and without backslash escapes."""
    out: dict[Relation, None] = {}
    for escapes in (True, False):
        _positions(_uncommented(body, escapes), schema, escapes, out)
    return list(out)


def body_relations(body: str, schema: str) -> list[Relation]:
    """`(database, relation)` pairs a routine body of `schema` may read, in order, without repeats.

    >>> body_relations("RETURN (SELECT email FROM hv WHERE id = x)", "d")
    [('d', 'hv')]
    >>> body_relations("RETURN (WITH c AS (SELECT 1 AS a) SELECT a FROM c JOIN o.t ON 1)", "d")
    [('o', 't')]
    >>> body_relations("BEGIN SELECT h.e INTO s FROM p, `o`.`h v` h WHERE 'from x'; END", "d")
    [('d', 'p'), ('o', 'h v')]
    >>> body_relations("BEGIN RETURN (SELECT a FROM (SELECT 1 AS a) q LEFT JOIN (o . t) ON 1, u); END", "d")
    [('d', 'u'), ('o', 't')]
    >>> body_relations("RETURN (SELECT x--1 FROM hv) + (SELECT 1 /*!50000 + (SELECT 2 FROM h2) */)", "d")
    [('d', 'hv'), ('d', 'h2')]
    >>> body_relations("BEGIN SELECT 'x' INTO s FROM p USE INDEX (i), `hv`; RETURN s; END", "d")
    [('d', 'p'), ('d', 'hv')]
    >>> body_relations("RETURN EXTRACT(YEAR FROM d)", "d"), body_relations(
    ...     "BEGIN RETURN TRIM(x FROM s); END", ""
    ... )
    ([], [('', 's')])
    """
    parsed = None if _UNSURE.search(body) else _parsed(body, schema)
    return parsed if parsed is not None else _placed(body, schema)


def _calls(body: str, schema: str, escapes: bool, out: dict[Relation, bool]) -> None:
    """Add each name chain followed by an argument list (not a column list after INTO or TABLE),
    or after CALL, to `out` (-> whether it was qualified)."""
    tokens = [(m[1] or m[3], m[0]) for m in _TOKENS[escapes].finditer(body)]
    at = 0
    while at < len(tokens):
        before = tokens[at - 1][0] if at else None
        if not tokens[at][0] or (at and tokens[at - 1][1] == "."):
            at += 1
            continue
        parts, at = [tokens[at][0]], at + 1
        while at + 1 < len(tokens) and tokens[at][1] == "." and tokens[at + 1][0]:
            parts.append(tokens[at + 1][0])
            at += 2
        after = (before or "").casefold()
        if parts[0][0].isdigit() or after in ("into", "table"):
            continue
        if after == "call" or (at < len(tokens) and tokens[at][1] == "("):
            names = [_unquote(p) for p in (parts[:2] if len(parts) > 2 else parts)]
            out[(names[0], names[1]) if len(names) == 2 else (schema, names[0])] = len(names) == 2


def body_calls(body: str, schema: str) -> dict[Relation, bool]:
    """Each routine a body may call (built-in functions included) -> whether it was qualified; a
    package routine (`pkg.f(`, `db.pkg.f(`) as `(db, pkg)` and as `(pkg, f)`, read both ways
    `_placed` reads relations.

    >>> body_calls("BEGIN INSERT INTO t (a) VALUES (lower(x)); CALL p; RETURN `o`.g(1) + o.pk.h(2); END", "d")
    {('d', 'VALUES'): False, ('d', 'lower'): False, ('d', 'p'): False, ('o', 'g'): True, ('o', 'pk'): True}
    """
    out: dict[Relation, bool] = {}
    for escapes in (True, False):
        _calls(_uncommented(body, escapes), schema, escapes, out)
    return out


def _probe(conn: Connection, relation: Relation) -> bool:
    """Whether the account may prepare `SELECT *` on `relation` (every column; PREPARE runs nothing)."""
    quoted = ".".join("`" + p.replace("`", "``") + "`" for p in relation)
    try:
        conn.execute(text("PREPARE mcpkit_probe FROM :q"), {"q": f"SELECT * FROM {quoted}"})
    except DBAPIError:
        return False
    conn.exec_driver_sql("DEALLOCATE PREPARE mcpkit_probe")
    return True


def _builtins(conn: Connection) -> set[str]:
    for query in _BUILTINS:
        try:
            return {str(w).casefold() for (w,) in conn.execute(text(query))}
        except DBAPIError:
            continue
    return set()


def unreadable_relations(
    conn: Connection,
    routines: Collection[tuple[str, str, str]],
    known: Collection[Relation],
    fold: Callable[[str], str],
) -> dict[Relation, str]:
    """Each routine (schema, name, body) whose body names a relation the account cannot read whole,
    or calls a routine it cannot see (one not listed in `routines`, not a built-in function), ->
    why (the first such), keyed case-folded; `known`: the relations the account sees."""
    seen = {(fold(s), fold(n)) for s, n in known}
    visible = {(s.casefold(), n.casefold()) for s, n, _ in routines}
    builtins = _builtins(conn)
    probed: dict[Relation, bool] = {}
    out: dict[Relation, str] = {}
    for schema, name, body in routines:
        if not body:
            continue
        for (db, called), qualified in body_calls(body, schema).items():
            routine = (db.casefold(), called.casefold())
            if routine in visible or (not qualified and routine[1] in builtins):
                continue
            if qualified and (schema.casefold(), routine[0]) in visible:
                continue  # `pkg.f(`: a package of the routine's database, whose body is listed
            out.setdefault(
                (schema.casefold(), name.casefold()),
                f"calls {db}.{called}, which this account cannot see (it may read a masked column)",
            )
        for relation in body_relations(body, schema):
            key = (fold(relation[0]), fold(relation[1]))
            if key not in probed:
                probed[key] = _probe(conn, relation)
            if probed[key]:
                continue
            what = "cannot see" if key not in seen else "cannot read every column of"
            out.setdefault(
                (schema.casefold(), name.casefold()),
                f"names {relation[0]}.{relation[1]}, which this account {what} (it may hold a masked"
                " column this check cannot see)",
            )
    return out
