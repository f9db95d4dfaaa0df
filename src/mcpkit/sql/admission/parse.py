"""Parse exactly one statement, or refuse."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from mcpkit.sql.errors import refuse
from mcpkit.sql.grammar import read_dialect

__all__ = ["parse_statement"]

_MULTIPLE = "Send exactly one SQL statement (one SELECT); several statements in one call are not allowed."


def _near(error: ParseError) -> str:
    for detail in error.errors:
        token = str(detail.get("highlight") or "").strip()
        if token:
            token = " ".join(token.split())[:40].replace("'", "")
            return f"syntax error near '{token}'."
    return "syntax error."


def parse_statement(sql: str, dialect: str) -> exp.Expr:
    """Parse `sql` in `dialect` and return its one statement.

    A single trailing semicolon (and trailing comments) are fine; an empty statement, a second
    statement, or text the parser cannot read is refused.

    >>> parse_statement("SELECT 1;", "sqlite").sql()
    'SELECT 1'

    Args:
        sql: Query text (already through `check_lexical`).
        dialect: A sqlglot dialect name.

    Returns:
        The statement's tree.

    Raises:
        Refused: reason `syntax` or `multiple_statements`.
    """
    try:
        trees = sqlglot.parse(sql, read=read_dialect(dialect))
    except ParseError as exc:
        refuse("syntax", _near(exc))
    except TokenError:
        refuse("syntax", "syntax error: an unterminated string, quoted name or comment.")
    if any(t is None for t in trees):
        if all(t is None for t in trees):
            refuse("syntax", "The query is empty; send one SELECT statement.")
        refuse("multiple_statements", _MULTIPLE)
    statements = [t for t in trees if t is not None and not isinstance(t, exp.Semicolon)]
    if len(statements) != 1:
        refuse("multiple_statements", _MULTIPLE)
    statement: exp.Expr = statements[0]
    return statement
