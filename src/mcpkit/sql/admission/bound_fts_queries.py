"""Pass: a SQLite full-text query is one string literal whose work is bounded before it runs.

FTS5 evaluates its query for each row inside one VM step, where neither the progress handler nor
`sqlite3_interrupt` reach (measured: with the handler set to every opcode, a NEAR of 80 phrases made
no call in 4 s). A NEAR group of P phrases walks P readers once per position of each phrase: P x P
passes over the row's positions (red team v3 F1: `NEAR(<200 x a>, 10)` over a 1,000,000-token row
answered a 2 s call after 17 s and ran 9 s more; built at run time with `replace(hex(zeroblob(600)),
...)`, 96 s of CPU and 372 MB). A phrase of T tokens makes about 2T passes. The query reaches FTS5 as
the right operand of MATCH, of `=`/`IN`/`IS` on the column named as the table, or as the argument of
the table called as a function (`docs('...')`); SQLite may also move a comparison with a renamed
column of a derived table onto the table. So each such operand must be a literal (text, number or
NULL) whose estimated passes (`fts_work`) stay within `MAX_FTS_WORK`; a column named as a table of
the query may not be renamed by a derived table's projection or named in USING. A column is taken
for the query column only where it can be: unqualified in a block reading (or inside one reading)
a table of its name, or qualified by that table's name or alias.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = [
    "FULL_TEXT_DIALECTS",
    "MAX_FTS_READERS",
    "MAX_FTS_WORK",
    "bound_fts_queries",
    "fts_readers",
    "fts_work",
]

FULL_TEXT_DIALECTS: Final = frozenset(["sqlite"])
"""The sqlglot dialects whose full-text query runs unbounded inside one engine step (SQLite's FTS5)."""

MAX_FTS_WORK: Final = 128
"""Passes over a row's term positions one full-text query may make (about 4 ms a pass per million
positions on a 2-core VM: 0.5 s for a 1,000,000-token row). NEAR of 10 phrases: 110."""
LIKE_PATTERN_BYTES: Final = 64
"""SQLite's LIKE/GLOB pattern limit on calls (`profiles.sqlite_text.LIKE_PATTERN_LENGTH`)."""
MAX_FTS_READERS: Final = 16
"""Words one full-text query may read. FTS5 holds each one's position list in the row, about a byte
per occurrence, at once (red team rtC F1: `a AND a AND ...` of 40 words, 8 MB each in an 8,000,000-word
row, took 315 MB in one call)."""
# Table-valued functions that are no full-text table: their arguments are not queries.
_FUNCTION_TABLES: Final = re.compile(r"json_each|json_tree|generate_series|vec_each|vec_npy_each|pragma_\w+")
_PIECE: Final = re.compile(r'"(?:[^"]|"")*"?|[^\s"(){}:+*^,\-]+|\S', re.S)
_OPERATORS: Final = frozenset({"AND", "OR", "NOT"})
_LITERAL: Final = (
    "A full-text search query must be a single string literal (its work is checked before it runs)."
)


def _phrase_work(chars: int) -> int:
    # tokens: one per character but two (trigram), or one per two characters (`a b c`); 2 passes each
    return 1 + 2 * (max(chars - 2, (chars + 1) // 2, 1) - 1)


def fts_work(query: str) -> int:
    """Passes over a row's positions an FTS query may make: each phrase, plus P x P per NEAR group.

    >>> fts_work("a"), fts_work('"a b c"'), fts_work("NEAR(a b c, 5)"), fts_work("x NEAR/3 y")
    (1, 5, 12, 6)
    """
    work, phrases, near, in_near, after_comma, joined, fts3 = 0, 0, 0, False, False, False, False
    current: int | None = None  # characters of the phrase being read

    def close() -> None:
        nonlocal work, current, phrases, near
        if current is not None:
            work += _phrase_work(current)
            phrases += 1
            near += in_near
            current = None

    pieces = _PIECE.findall(query)
    for i, piece in enumerate(pieces):
        word = piece.upper()
        if piece == "+":
            joined = True
            continue
        if piece.startswith('"') or not (len(piece) == 1 and not piece.isalnum()):
            if word in _OPERATORS or (in_near and after_comma):
                close()
            elif word == "NEAR" and i + 1 < len(pieces) and pieces[i + 1] == "(":
                close()
                in_near, after_comma, near = True, False, 0
            elif word == "NEAR" or word.startswith("NEAR/"):  # FTS3/4's `a NEAR/3 b`: all phrases one group
                close()
                fts3 = True
            else:
                text = piece[1:-1].replace('""', '"') if piece.startswith('"') else piece
                if joined and current is not None:
                    current += 1 + len(text)
                else:
                    close()
                    current = len(text)
        elif piece == "," and in_near:
            close()
            after_comma = True
        elif piece == ")" and in_near:
            close()
            work += near * near
            in_near = False
        elif piece not in "*^":
            close()
        joined = False
    close()
    if fts3 or in_near:
        work += phrases * phrases
    return work


def fts_readers(query: str) -> int:
    """Words (term readers) an FTS query holds: each word of each phrase, a bare word or prefix one.

    >>> fts_readers("a AND b"), fts_readers('"a b c" OR d*'), fts_readers("NEAR(a b, 5)")
    (2, 4, 2)
    """
    readers, pieces = 0, _PIECE.findall(query)
    for i, piece in enumerate(pieces):
        before, after = pieces[i - 1] if i else "", pieces[i + 1] if i + 1 < len(pieces) else ""
        if piece.startswith('"'):
            readers += max(1, len(piece[1:].rstrip('"').split()))
        elif (
            after == ":"
            or before == ","
            or piece.upper() in _OPERATORS | {"NEAR"}
            or piece.upper().startswith("NEAR/")
        ):
            continue  # a column filter, NEAR's distance, an operator
        elif len(piece) > 1 or piece.isalnum():
            readers += 1
    return readers


def _check_operand(value: exp.Expr | None) -> None:
    while isinstance(value, exp.Paren):
        value = value.this
    if isinstance(value, exp.Null) or (isinstance(value, exp.Literal) and not value.is_string):
        return
    if not isinstance(value, exp.Literal):
        refuse("too_complex", _LITERAL)
    if fts_work(value.this) > MAX_FTS_WORK:
        refuse(
            "too_complex",
            f"The full-text query is too complex: at most {MAX_FTS_WORK} units of work (a NEAR group of"
            " n phrases costs n x n, a phrase of t tokens about 2t); use fewer phrases.",
        )
    if fts_readers(value.this) > MAX_FTS_READERS:
        refuse(
            "too_complex",
            f"The full-text query has too many words: at most {MAX_FTS_READERS} (each is read whole"
            " for the row); use fewer or more distinctive words.",
        )


def _check_patterns(tree: exp.Expr) -> None:
    """A LIKE or GLOB pattern past SQLite's limit fails when like() runs, after FTS5 has answered it
    (a trigram table reads `body LIKE '%...%'` as a phrase): refused before (red team rtC F11: 200
    characters ran 2.7 s and took 200 MB, then failed)."""
    for node in tree.find_all(exp.Like, exp.ILike, exp.Glob):
        pattern = node.expression
        if isinstance(pattern, exp.Literal) and len(pattern.this.encode()) > LIKE_PATTERN_BYTES:
            refuse(
                "too_complex",
                f"A LIKE or GLOB pattern here may be at most {LIKE_PATTERN_BYTES} bytes; use a shorter one.",
            )


def _call_name(call: exp.Func) -> str:
    """A table-valued call's name, case-folded."""
    return (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).casefold()


def _table_names(table: exp.Table) -> set[str]:
    call = table.this
    return {table.name.casefold()} | ({_call_name(call)} if isinstance(call, exp.Func) else set())


def _in_scope(column: exp.Column, every: set[str]) -> set[str]:
    """The tables an unqualified `column` may belong to: the sources of its block and of the blocks
    around it (a correlated name); `every` table outside any block."""
    block = column.find_ancestor(exp.Select)
    if block is None:
        return every
    names: set[str] = set()
    while block is not None:
        for table in block.find_all(exp.Table):
            if table.find_ancestor(exp.Select) is block:
                names |= _table_names(table)
        block = block.find_ancestor(exp.Select)
    return names


def _renamed_by_derived_table(column: exp.Column) -> bool:
    """Whether `column` is a bare projection of a select SQLite may merge into an outer query."""
    projected = column.parent if isinstance(column.parent, exp.Alias) else column
    select = projected.parent
    if not isinstance(select, exp.Select) or not any(e is projected for e in select.expressions):
        return False
    node: exp.Expr | None = select.parent
    while isinstance(node, exp.Subquery | exp.SetOperation | exp.Paren):
        if isinstance(node, exp.Subquery) and isinstance(node.parent, exp.From | exp.Join):
            return True
        node = node.parent
    return isinstance(node, exp.CTE)


def _check_query_column(column: exp.Column) -> None:
    parent = column.parent
    if isinstance(parent, exp.EQ | exp.NEQ | exp.Is | exp.NullSafeEQ | exp.Match):
        _check_operand(parent.expression if parent.this is column else parent.this)
    elif isinstance(parent, exp.In):
        if parent.args.get("query") is not None or parent.args.get("unnest") is not None:
            refuse("too_complex", _LITERAL)
        for value in parent.expressions if parent.this is column else [parent.this]:
            _check_operand(value)
    elif _renamed_by_derived_table(column):
        refuse("too_complex", "A derived table or CTE may not rename a full-text table's query column.")


def bound_fts_queries(tree: exp.Expr, dialect: str) -> exp.Expr:
    """Refuse a SQLite full-text query that is not a literal or would make over `MAX_FTS_WORK` passes.

    >>> import sqlglot
    >>> sql = "SELECT rowid FROM docs WHERE docs MATCH 'NEAR(a b, 5)'"
    >>> bound_fts_queries(sqlglot.parse_one(sql, read="sqlite"), "sqlite").sql("sqlite") == sql
    True

    Args:
        tree: One parsed statement.
        dialect: The target's sqlglot dialect (checked only in `FULL_TEXT_DIALECTS`).

    Returns:
        `tree`, unchanged.

    Raises:
        Refused: reason `too_complex`.
    """
    if dialect not in FULL_TEXT_DIALECTS:
        return tree
    _check_patterns(tree)
    for match in tree.find_all(exp.Match):
        _check_operand(match.expression)
    tables: set[str] = set()
    qualifiers: set[str] = set()  # `column.qualifier` of a query column: its table's name or alias
    for table in tree.find_all(exp.Table):
        names = _table_names(table)
        tables |= names
        qualifiers |= {f"{n}.{q}" for n in names for q in (*names, table.alias.casefold()) if q}
        call = table.this
        if isinstance(call, exp.Func) and not _FUNCTION_TABLES.fullmatch(_call_name(call)):
            # a virtual table given its hidden columns
            for argument in call.expressions if isinstance(call, exp.Anonymous) else call.args.values():
                if isinstance(argument, exp.Expr):
                    _check_operand(argument)
    tables.discard("")
    for column in tree.find_all(exp.Column):
        name, qualifier = column.name.casefold(), column.table.casefold()
        # `orders.customer` or `customer` beside a table `customer` the block does not read is an
        # ordinary column; through a derived table a query column was refused inside
        if name in tables and (
            f"{name}.{qualifier}" in qualifiers if qualifier else name in _in_scope(column, tables)
        ):
            _check_query_column(column)
    for join in tree.find_all(exp.Join):
        if any(u.name.casefold() in tables for u in join.args.get("using") or []):
            refuse("too_complex", "USING may not name a column named as a table of the query.")
    return tree
