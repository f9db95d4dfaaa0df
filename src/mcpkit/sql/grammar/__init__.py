"""The SQL grammar mcpkit reads and writes per database: sqlglot's dialects, corrected where the
server reads SQL differently (each correction is named in its module's docstring).

Read with `read_dialect(name)` and write with `sent_dialect(name)`: the same dialect, so what is
sent is what was checked.
"""

from __future__ import annotations

from typing import Final

from sqlglot.dialects.dialect import Dialect

from mcpkit.sql.grammar.mysql import MySQLFamily
from mcpkit.sql.grammar.postgres import OrderedUsing, PostgresFamily

__all__ = ["MySQLFamily", "OrderedUsing", "PostgresFamily", "read_dialect", "sent_dialect"]

_FAMILIES: Final[dict[str, Dialect]] = {"mysql": MySQLFamily(), "postgres": PostgresFamily()}


def read_dialect(dialect: str) -> str | Dialect:
    """The dialect that reads SQL written for the database of `dialect` (a sqlglot dialect name).

    >>> import sqlglot
    >>> sqlglot.parse_one("SELECT a FROM t ORDER BY a USING ~<~", read=read_dialect("postgres")).sql(
    ...     dialect=sent_dialect("postgres"))
    'SELECT a FROM t ORDER BY a USING ~<~'
    """
    return _FAMILIES.get(dialect, dialect)


def sent_dialect(dialect: str) -> str | Dialect:
    """The dialect to write SQL in for the database of `dialect` (the one it was read with).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT a FROM t WHERE a RLIKE '^x'", read=read_dialect("mysql"))
    >>> tree.sql(dialect=sent_dialect("mysql"))
    "SELECT a FROM t WHERE (a REGEXP '^x')"
    """
    return _FAMILIES.get(dialect, dialect)
