"""The relations a MariaDB routine body reads that the account cannot read whole (red team rt29 F3).

A routine a DEFINER view calls runs with the view definer's rights (`mask_routes`), so a relation
its body reads that the account cannot see (an INVOKER view over the masked `customers.email`, not
granted to it), or whose every column it cannot read (a foreign-key or generated copy of a masked
column it was never granted), may hand a masked value on while the body names nothing masked the
check can see. PREPARE of the view as the account does not open function bodies. So each relation
a body names is prepared as `SELECT *` as the account: a refusal (an unseen relation, a column it
lacks, an INVOKER view reading one) counts as reading a masked column: fail closed.

The account cannot tell a relation it is not granted from one that does not exist (both are refused,
1142), so not every word of a body can be probed: the names in relation positions are. The body is
read as MariaDB's lexer reads it (`routine_tokens`: identifiers with any character from U+0080,
digit-initial names, executable comments both ways, strings both ways; red team rt31 F3), and the
positions over-approximate: each name after FROM, any `... JOIN` or UPDATE, and after each comma at
the list's own depth or inside a parenthesised list of relations (`FROM (a, b)`, `{oj a LEFT JOIN b
ON 1}`: rt31 F1, F2; MariaDB takes any word for `oj`: `{ok hv}` reads `hv`). An alias is skipped
only after a relation (or AS) and only when MariaDB accepts the word as one; the words that end a
list are all words it refuses as an alias (`do`, `end`, `lateral` are names: rt31 F4). A `.` where a
name is expected keeps the position: `FROM .t`, `JOIN . t` (ODBC) name `t` of the routine's database
(rt33b F1). A body that parses for sqlglot gives its tables as well. A name a CTE bears is probed
too: inside that CTE's own definition or an earlier CTE of its WITH it is the relation (rt33b F2),
so a CTE named like no relation counts as unseen (an over-refusal, fail closed). An unqualified name
is the routine's database's.
A relation of a system schema counts unread whatever the probe says (rt33b F3: every account reads
`information_schema.PARTITIONS`, whose row counts per partition of a table partitioned by a masked
column tell the column's histogram). A call to a routine the account cannot see counts the same way
(`body_calls`), as does a body using dynamic SQL (PREPARE, EXECUTE) or naming more than `PROBE_CAP`
relations to check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from typing import Final

import sqlglot
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.profiles.mysql.routine_tokens import Token, is_number, readings
from mcpkit.sql.profiles.mysql.view_text import Relation

__all__ = [
    "PROBE_CAP",
    "SYSTEM_SCHEMAS",
    "body_calls",
    "body_relations",
    "dynamic_sql",
    "unreadable_relations",
]

SYSTEM_SCHEMAS: Final = frozenset({"information_schema", "mysql", "performance_schema", "sys"})
"""The profile's `system_schemas`: every account reads information_schema, which tells the sizes and
row counts (per partition too) of tables it holds a column of, so a body naming one counts unread."""
PROBE_CAP: Final = 3000
"""At most this many distinct relations prepared per verification; past it a body counts unread."""

_RETURN: Final = re.compile(r"^\s*RETURN\b(?P<expr>.*)$", re.IGNORECASE | re.DOTALL)
# sqlglot reads these otherwise than MariaDB may: such a body is read by relation positions only.
_UNSURE: Final = re.compile(r"/\*|--|#|\"|\\|\{|[^\x00-\x7f]")
_PLACED: Final = re.compile(r"^(?:from|\w*join|update)$", re.IGNORECASE)
# Built-in functions (`lower(`): a call to one reads no stored routine. MariaDB lists them (10.6.3+);
# MySQL 8 does not: there a built-in call counts (fail closed). A keyword (`varchar(`, `if(`, `in (`)
# is no call only when the server refuses it as one: `status(1)`, `data(1)` call a stored function
# (red team rt31: they were skipped as keywords); `_keyword_call` asks the server.
_FUNCTIONS: Final = "SELECT `function` FROM information_schema.SQL_FUNCTIONS"
_KEYWORDS: Final = "SELECT word FROM information_schema.KEYWORDS"
# PREPARE of `SELECT word(1)` naming a stored function: does not exist, denied, no database
_CALLED: Final = frozenset({1305, 1630, 1046, 1370, 1044, 1142})
# Words a relation position may hold that name no relation: a subquery, VALUES, DUAL (all reserved).
NOT_RELATIONS: Final = frozenset({"select", "with", "values", "dual", "table"})
# Words that end a list at its own depth (commas after them are not relations): each one MariaDB
# refuses as an alias (a test holds the server to it), so none is an alias.
ENDS: Final = frozenset(
    {"where", "group", "having", "order", "limit", "union", "except", "intersect", "window", "into", "set"}
    | {"then", "returning", "lock", "procedure", "fetch", "offset"}
)  # not FOR: `FROM sv FOR SYSTEM_TIME ALL s, hv h` goes on (FOR UPDATE ends with the statement)
# Words after a relation that are no alias (MariaDB refuses each as one; a test holds it to it).
NOT_ALIASES: Final = ENDS | frozenset(
    {"on", "using", "join", "inner", "left", "right", "cross", "natural", "straight_join", "outer", "for"}
    | {"use", "force", "ignore", "partition", "as", "key", "index"}
)
_DYNAMIC: Final = frozenset({"prepare", "execute"})


def _word(token: Token, *words: str) -> bool:
    """An unquoted keyword: ASCII only (MariaDB's keywords are; a long s, U+017F, folds to `s` in Python)."""
    return token.kind == "name" and token.text.isascii() and token.text.lower() in words


def _fold(name: str) -> str:
    """A routine name compared without case: ASCII letters only (a non-ASCII name must match
    exactly, or it counts as unseen: fail closed)."""
    return name.lower() if name.isascii() else name


def _chain(tokens: list[Token], at: int) -> tuple[list[Token], int]:
    """The dotted name starting at `at` (`db . t`), and the index after it."""
    parts, at = [tokens[at]], at + 1
    while at + 1 < len(tokens) and tokens[at] == ("char", ".") and tokens[at + 1].kind in ("name", "quoted"):
        parts.append(tokens[at + 1])
        at += 2
    return parts, at


def _relation(parts: list[Token], schema: str) -> Relation:
    names = [p.text for p in parts[-2:]]
    return (names[0], names[1]) if len(names) == 2 else (schema, names[0])


def _positions(tokens: list[Token], start: int, schema: str) -> Iterator[Relation]:
    """The names of the relation list after `tokens[start]` (FROM, a JOIN, UPDATE)."""
    groups: list[bool] = []  # per open parenthesis: whether it holds a list of relations
    expect, alias, at = True, False, start + 1
    while _word(tokens[start], "update") and at < len(tokens) and _word(tokens[at], "low_priority", "ignore"):
        at += 1
    while at < len(tokens):
        token = tokens[at]
        if token.kind in ("name", "quoted") and expect:
            parts, at = _chain(tokens, at)
            expect, alias = False, True
            called = at < len(tokens) and tokens[at] == ("char", "(")
            bare = len(parts) == 1 and (is_number(parts[0]) or _word(parts[0], *NOT_RELATIONS))
            if not called and not bare:
                yield _relation(parts, schema)
            continue
        if expect and token == ("char", "."):  # `FROM .t`, `. t`: ODBC's table of the current database
            at += 1
            continue
        if alias and _word(token, "as"):  # the alias follows, whatever the word
            at += 2
            alias = False
            continue
        if token.kind in ("name", "quoted") and alias:
            alias = False
            if not _word(token, *NOT_ALIASES):
                at += 1
                continue
        alias = False
        if token.kind == "char" and token.text in "({":
            nxt = tokens[at + 1] if at + 1 < len(tokens) else Token("char", "")
            groups.append(expect and not _word(nxt, "select", "with", "values", "table"))
            if token.text == "{" and nxt.kind in ("name", "quoted"):  # `{oj t}`, `{any t}`: no relation
                at += 1
        elif token.kind == "char" and token.text in ")}":
            if not groups:
                return
            groups.pop()
            expect, alias = False, True  # a derived table's alias may follow
        elif token == ("char", ";") or (not groups and _word(token, *ENDS)):
            return
        elif token == ("char", ","):
            expect = not groups or groups[-1]
        else:
            expect = False
        at += 1


def _parsed(body: str, schema: str) -> list[Relation] | None:
    """The tables of a body that parses as one statement (a CTE's name included), None when it does not."""
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
        if isinstance(table.this, sqlglot.exp.Identifier):
            out[(table.db or schema, table.name)] = None
    return list(out)


def body_relations(body: str, schema: str) -> list[Relation]:
    """`(database, relation)` pairs a routine body of `schema` may read, in order, without repeats.

    >>> body_relations("RETURN (SELECT email FROM hv WHERE id = x)", "d")
    [('d', 'hv')]
    >>> body_relations("RETURN (WITH c AS (SELECT 1 AS a) SELECT a FROM c JOIN o.t ON 1)", "d")
    [('d', 'c'), ('o', 't')]
    >>> body_relations("RETURN (SELECT e FROM .hv, . h2 JOIN (.`h3`) ON 1 WHERE id = x /* c */)", "d")
    [('d', 'hv'), ('d', 'h2'), ('d', 'h3')]
    >>> body_relations("BEGIN SELECT h.e INTO s FROM p, `o`.`h v` h WHERE 'from x'; END", "d")
    [('d', 'p'), ('o', 'h v')]
    >>> body_relations("BEGIN RETURN (SELECT 1 FROM (a o, b do, {oj c LEFT JOIN `e` ON 1}), 1f); END", "d")
    [('d', 'a'), ('d', 'b'), ('d', 'c'), ('d', '1f'), ('d', 'e')]
    >>> body_relations("BEGIN RETURN (SELECT h.e FROM {ok hv h}, {`x` .h2}); END", "d")
    [('d', 'hv'), ('d', 'h2')]
    >>> body_relations("RETURN (SELECT x--1 FROM hv) + (SELECT 1 /*!50000 + (SELECT 2 FROM h2) */)", "d")
    [('d', 'hv'), ('d', 'h2')]
    >>> body_relations("BEGIN SELECT 'x' INTO s FROM p USE INDEX (i, j), `hv`; RETURN s; END", "d")
    [('d', 'p'), ('d', 'hv')]
    >>> body_relations("BEGIN RETURN (SELECT 1 FROM a \u017fet, \u017felect, \u0663); END", "d")
    [('d', 'a'), ('d', '\u017felect'), ('d', '\u0663')]
    >>> body_relations("BEGIN UPDATE LOW_PRIORITY IGNORE a, hv SET a.x = 1; END", "d")
    [('d', 'a'), ('d', 'hv')]
    >>> body_relations("BEGIN DELETE FROM a USING hv JOIN b USING (id); END", "d")
    [('d', 'a'), ('d', 'hv'), ('d', 'b')]
    >>> body_relations("RETURN EXTRACT(YEAR FROM d)", "d"), body_relations(
    ...     "BEGIN RETURN TRIM(x FROM s); END", ""
    ... )
    ([('d', 'd')], [('', 's')])
    """
    out: dict[Relation, None] = {}
    for tokens in readings(body):
        for start, token in enumerate(tokens):
            nxt = tokens[start + 1] if start + 1 < len(tokens) else None
            if token.kind == "name" and (
                _PLACED.match(token.text) or (_word(token, "using") and nxt != ("char", "("))
            ):  # `DELETE FROM a USING hv`, not `JOIN b USING (id)`
                out.update(dict.fromkeys(_positions(tokens, start, schema)))
    # A CTE's name is probed too: inside its own definition, or an earlier CTE of its WITH, the name
    # is the relation (rt33b F2: `WITH hv AS (SELECT email FROM hv)` read the hidden view `hv`).
    parsed = None if _UNSURE.search(body) else _parsed(body, schema)
    return list(dict.fromkeys([*out, *(parsed or [])]))


def dynamic_sql(body: str) -> bool:
    """Whether a body may run SQL built at run time (PREPARE, EXECUTE, EXECUTE IMMEDIATE).

    >>> dynamic_sql("BEGIN EXECUTE IMMEDIATE CONCAT('SELECT ', x); END"), dynamic_sql("RETURN 'execute'")
    (True, False)
    """
    return any(_word(t, *_DYNAMIC) for tokens in readings(body) for t in tokens)


def body_calls(body: str, schema: str) -> dict[Relation, bool]:
    """Each routine a body may call (built-in functions included) -> whether it was qualified; a
    package routine (`pkg.f(`, `db.pkg.f(`) as `(db, pkg)` and as `(pkg, f)`. A name followed by
    an argument list (not a column list after INTO or TABLE), or after CALL; a backquoted name
    counts as qualified (it may not be a built-in).

    >>> body_calls("BEGIN INSERT INTO t (a) VALUES (lower(x)); CALL p; RETURN `o`.g(1) + o.pk.h(2); END", "d")
    {('d', 'VALUES'): False, ('d', 'lower'): False, ('d', 'p'): False, ('o', 'g'): True, ('o', 'pk'): True}
    >>> body_calls("BEGIN RETURN rt€g(1) + 1g (2) + `if`(3); END", "d")
    {('d', 'rt€g'): False, ('d', '1g'): False, ('d', 'if'): True}
    """
    out: dict[Relation, bool] = {}
    for tokens in readings(body):
        at = 0
        while at < len(tokens):
            before = tokens[at - 1] if at else Token("char", "")
            if tokens[at].kind not in ("name", "quoted") or before == ("char", "."):
                at += 1
                continue
            parts, at = _chain(tokens, at)
            if is_number(parts[0]) or _word(before, "into", "table"):
                continue
            if _word(before, "call") or (at < len(tokens) and tokens[at] == ("char", "(")):
                names = [p.text for p in (parts[:2] if len(parts) > 2 else parts)]
                qualified = len(names) == 2 or parts[0].kind == "quoted"
                key = (names[0], names[1]) if len(names) == 2 else (schema, names[0])
                out[key] = out.get(key, False) or qualified
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


def _words(conn: Connection, query: str) -> set[str]:
    try:
        return {str(w).casefold() for (w,) in conn.execute(text(query))}
    except DBAPIError:
        return set()


def _keyword_call(conn: Connection, word: str, named: bool) -> bool:
    """Whether the server may read `word(...)` as a call to a stored function (`named`: a visible
    routine bears the name, so a prepared call may have reached it)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
        return True
    for args in ("", "1"):
        try:
            conn.execute(text("PREPARE mcpkit_probe FROM :q"), {"q": f"SELECT {word}({args})"})
        except DBAPIError as exc:
            code = getattr(exc.orig, "args", (0,))[0]
            if code in _CALLED:
                return True
            continue
        conn.exec_driver_sql("DEALLOCATE PREPARE mcpkit_probe")
        if named:
            return True
    return False


class _Calls:
    """Which calls in a body reach a routine the account cannot see."""

    def __init__(self, conn: Connection, visible: set[Relation], fold: Callable[[str], str]) -> None:
        self.conn, self.visible, self.fold = conn, visible, fold
        self.functions, self.keywords = _words(conn, _FUNCTIONS), _words(conn, _KEYWORDS)
        self.names = {n for _, n in visible}  # `_fold`ed
        self.asked: dict[str, bool] = {}

    def builtin(self, word: str) -> bool:
        if not word.isascii():  # U+017F `substr(` is no built-in to MariaDB
            return False
        if word in self.functions:
            return True
        if word not in self.keywords:
            return False
        if word not in self.asked:
            self.asked[word] = not _keyword_call(self.conn, word, word in self.names)
        return self.asked[word]

    def unseen(self, body: str, schema: str) -> str | None:
        for (db, called), qualified in body_calls(body, schema).items():
            # A database name compares as lower_case_table_names says, a routine name without case
            # (rt31 F11: `RT31_DB.g` hid behind a visible `rt31_db.g`). No `pkg.f(` package call is
            # skipped: packages exist only under sql_mode=ORACLE, whose bodies count as unread
            # (`body_modes`), so `db.f(` is database `db` (rt31 F13).
            routine = (self.fold(db), _fold(called))
            if routine in self.visible or (not qualified and self.builtin(routine[1])):
                continue
            return f"calls {db}.{called}, which this account cannot see (it may read a masked column)"
        return None


def unreadable_relations(
    conn: Connection,
    routines: Collection[tuple[str, str, str]],
    known: Collection[Relation],
    fold: Callable[[str], str],
) -> dict[Relation, str]:
    """Each routine (schema, name, body) whose body names a relation the account cannot read whole,
    calls a routine it cannot see (one not listed in `routines`, not a built-in function), uses
    dynamic SQL or names too many relations to check, -> why (the first such), keyed case-folded;
    `known`: the relations the account sees."""
    seen = {(fold(s), fold(n)) for s, n in known}
    visible = {(fold(s), _fold(n)) for s, n, _ in routines}
    calls = _Calls(conn, visible, fold)
    probed: dict[Relation, bool] = {}
    out: dict[Relation, str] = {}
    for schema, name, body in routines:
        key = (schema.casefold(), name.casefold())
        if not body:
            continue
        if dynamic_sql(body):
            out[key] = "runs dynamic SQL (PREPARE or EXECUTE), which this check cannot read"
            continue
        called = calls.unseen(body, schema)
        if called:
            out[key] = called
            continue
        for relation in body_relations(body, schema):
            if relation[0].casefold() in SYSTEM_SCHEMAS:  # rt33b F3: `information_schema.PARTITIONS`
                out[key] = (
                    f"names {relation[0]}.{relation[1]}, which this check cannot see into (it may tell"
                    " a masked column's sizes or counts)"
                )
                break
            folded = (fold(relation[0]), fold(relation[1]))
            if folded not in probed:
                if len(probed) >= PROBE_CAP:
                    out[key] = (
                        f"names more relations than this check reads ({PROBE_CAP}), so it cannot be checked"
                    )
                    break
                probed[folded] = _probe(conn, relation)
            if not probed[folded]:
                what = "cannot see" if folded not in seen else "cannot read every column of"
                out[key] = (
                    f"names {relation[0]}.{relation[1]}, which this account {what} (it may hold a masked"
                    " column this check cannot see)"
                )
                break
    return out
