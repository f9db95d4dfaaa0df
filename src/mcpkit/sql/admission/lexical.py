"""Lexical checks: text the parser and the database could read differently is refused.

These run on sqlglot's tokens, never on regular expressions over SQL: the only raw-text check
is for MySQL executable comments (`/*! ... */`, MariaDB `/*M! ... */`), because the tokenizer
drops comments and MySQL *runs* the text inside them, so no tree ever shows it.
"""

from __future__ import annotations

from typing import Final

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from mcpkit.sql.admission.require_query import NOT_A_QUERY
from mcpkit.sql.errors import refuse
from mcpkit.sql.grammar import read_dialect

__all__ = ["MAX_NUMBER_CHARS", "MAX_SQL_CHARS", "check_lexical"]

MAX_SQL_CHARS: Final = 100_000
MAX_NUMBER_CHARS: Final = 1_000
"""A number literal's length: Python reads no integer of more than 4,300 digits (`int()` raised
inside admission and the call answered INTERNAL, red team rt26 F4)."""

_COMMENT_MESSAGE: Final = (
    "This comment form is not allowed (MySQL /*! */ or /*M! */, # comments, nested comments); "
    "remove the comments and send the query alone."
)
_STRING_MESSAGE: Final = (
    "String literals where a backslash escapes a quote, or escape-string forms (E'', U&''), are not "
    "allowed because the database may read them differently; write a quote inside a string as ''."
)
_UNREADABLE: Final = (
    "The query has characters outside SQL tokens and comments; send one plain SELECT statement."
)

# Token types whose raw text is a string literal.
_STRINGS: Final = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING})
# String forms whose escapes depend on server settings or that sqlglot and the server may read apart.
_REFUSED_STRINGS: Final[dict[str, frozenset[TokenType]]] = {
    "postgres": frozenset({TokenType.BYTE_STRING, TokenType.UNICODE_STRING}),
}
# Dialects where a backslash in a plain string depends on a server setting: MySQL's
# NO_BACKSLASH_ESCAPES. Only a backslash that escapes a quote (an odd run of backslashes before
# it) can move where a string ends; `'C:\\'` (an escaped backslash) ends where it seems to either
# way. PostgreSQL is not here: every call pins standard_conforming_strings=on, which is how sqlglot
# reads it (a backslash is a plain character, so `'C:\'` is the string C:\).
_BACKSLASH_SENSITIVE: Final = frozenset({"mysql"})
# The longest name (bytes, UTF-8) an engine keeps whole. PostgreSQL cuts a longer one to 63 bytes
# (NAMEDATALEN - 1) without a word, so two names admission tells apart can be one name there:
# `SELECT <63 q>x.record_out FROM customers <63 q>y` ran record_out(row) (red team rt28 F1).
# MariaDB refuses a name past its limit (error 1059) instead of cutting it: not listed.
_IDENTIFIER_BYTES: Final[dict[str, int]] = {"postgres": 63}
_NAMES: Final = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
# Dialects whose `U&"d\0061ta"` (U, & and a quoted name, touching) is one name spelled with escapes
# (`data`); sqlglot reads `U & "d\0061ta"`, a bitwise AND of two other columns (rtg N3).
_UNICODE_NAMES: Final = frozenset({"postgres"})
_UNICODE_NAME_MESSAGE: Final = (
    'Names written with Unicode escapes (U&"...") are not allowed because the database may read them '
    "differently; write the name plainly, in double quotes if needed."
)


def _escapes_quote(raw: str) -> bool:
    # Whether a backslash escapes a quote somewhere in the literal's raw text (quotes included).
    run = 0
    for i, ch in enumerate(raw):
        if ch in "'\"" and run % 2 == 1 and i > 0:
            return True
        run = run + 1 if ch == "\\" else 0
    return False


def _check_gap(gap: str, dialect: str) -> None:
    # Text between two tokens must be whitespace and plain comments only.
    i, n = 0, len(gap)
    while i < n:
        ch = gap[i]
        if ch.isspace():
            i += 1
        elif gap.startswith("--", i):
            if dialect == "mysql" and i + 2 < n and not gap[i + 2].isspace():
                refuse("comment", _COMMENT_MESSAGE)
            end = gap.find("\n", i)
            i = n if end < 0 else end + 1
        elif gap.startswith("/*", i):
            end = gap.find("*/", i + 2)
            body = gap[i + 2 : n if end < 0 else end]
            if end < 0 or "/*" in body or body.startswith("!") or body.startswith("M!"):
                refuse("comment", _COMMENT_MESSAGE)
            i = end + 2
        elif ch == "#":
            refuse("comment", _COMMENT_MESSAGE)
        else:
            refuse("syntax", _UNREADABLE)


def _check_string(raw: str, token: Token, dialect: str) -> None:
    if token.token_type in _REFUSED_STRINGS.get(dialect, frozenset()):
        refuse("string_literal", _STRING_MESSAGE)
    if token.token_type in _STRINGS and dialect in _BACKSLASH_SENSITIVE and _escapes_quote(raw):
        refuse("string_literal", _STRING_MESSAGE)


def _unicode_name(before: Token | None, amp: Token | None, token: Token) -> bool:
    # `U&"..."`: a bare U, then & and the quoted name, with nothing between them
    return (
        token.token_type == TokenType.IDENTIFIER
        and amp is not None
        and amp.token_type == TokenType.AMP
        and amp.end + 1 == token.start
        and before is not None
        and before.token_type == TokenType.VAR
        and before.text.casefold() == "u"
        and before.end + 1 == amp.start
    )


def check_lexical(sql: str, dialect: str) -> list[Token]:
    """Refuse text whose reading depends on who reads it; return sqlglot's tokens.

    >>> [t.text for t in check_lexical("SELECT 1 -- one", "postgres")]
    ['SELECT', '1']

    Args:
        sql: The raw query text.
        dialect: The sqlglot dialect of the target database.

    Returns:
        The tokens.

    Raises:
        Refused: a command keyword (EXPLAIN, SHOW, ...), too long, an unpaired surrogate, an
            executable or nested comment, a `#` comment, a string literal with a backslash before a
            quote or an escape prefix (where server settings decide where it ends), a Unicode-escaped
            name (PostgreSQL `U&"..."`, `unicode_identifier`), a number longer than
            `MAX_NUMBER_CHARS`, a name longer than the engine keeps (`too_long`), or text
            that does not tokenize.
    """
    if len(sql) > MAX_SQL_CHARS:
        refuse("too_long", f"The query is longer than {MAX_SQL_CHARS} characters; send a shorter query.")
    try:
        sql.encode()
    except UnicodeEncodeError:  # no driver can send it: each raised it past the engine's error handling
        refuse("syntax", "The query is not valid Unicode text (it holds an unpaired surrogate).")
    if dialect == "mysql" and ("/*!" in sql or "/*M!" in sql.upper()):
        refuse("comment", _COMMENT_MESSAGE)
    reader = Dialect.get_or_raise(read_dialect(dialect))
    try:
        tokens = reader.tokenize(sql)
    except TokenError:
        refuse("syntax", "syntax error: an unterminated string, quoted name or comment.")
    commands = reader.tokenizer_class.COMMANDS
    previous: Token | None = None
    before: Token | None = None
    previous_end = -1
    for token in tokens:
        if dialect in _UNICODE_NAMES and _unicode_name(before, previous, token):
            refuse("unicode_identifier", _UNICODE_NAME_MESSAGE)
        if token.token_type in commands and (previous is None or previous.token_type == TokenType.SEMICOLON):
            # EXPLAIN, SHOW, LOCK, ... opening a statement: the tokenizer swallows the rest raw.
            refuse("not_a_query", NOT_A_QUERY)
        if token.token_type == TokenType.NUMBER and len(token.text) > MAX_NUMBER_CHARS:
            refuse(
                "too_long",
                f"A number in the query is longer than {MAX_NUMBER_CHARS} characters; write a shorter one.",
            )
        limit = _IDENTIFIER_BYTES.get(dialect)
        if limit is not None and token.token_type in _NAMES and len(token.text.encode()) > limit:
            refuse(
                "too_long",
                f"A name in the query is longer than {limit} bytes, which this database shortens; "
                "use a shorter name or alias.",
            )
        before, previous = previous, token
        _check_gap(sql[previous_end + 1 : token.start], dialect)
        _check_string(sql[token.start : token.end + 1], token, dialect)
        previous_end = token.end
    _check_gap(sql[previous_end + 1 :], dialect)
    return tokens
