"""Report parameters on PostgreSQL: the declared type a parameter is cast to when the server infers none.

psycopg sends a `str` and every `None` as an untyped (`unknown`) parameter, and PostgreSQL infers
its type from where it stands. A parameter only tested for NULL (`:who IS NULL OR name = :who`,
where the first use decides) has no such place, and every call fails with "could not determine
data type of parameter $1" (SQLSTATE 42P18 or 42P08), while `EXPLAIN` with a sample value plans fine.
The report loader asks the server which parameter it cannot type and casts that one to its
declared type; parameters the server types from their context are left alone, so comparing a
string parameter with a uuid, enum or date column keeps working.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DECLARED", "untyped_parameter"]

DECLARED: Final = {
    "integer": "BIGINT",
    "number": "DOUBLE PRECISION",  # what psycopg sends a float as
    "string": "TEXT",
    "boolean": "BOOLEAN",
    "date": "DATE",
}
"""A report parameter's declared type -> the PostgreSQL type it is cast to when it has none."""

_UNTYPED: Final = frozenset({"42P18", "42P08"})  # indeterminate_datatype, ambiguous_parameter
_NUMBER: Final = re.compile(r"parameter \$(\d+)")


def untyped_parameter(exc: BaseException) -> int | None:
    """The 1-based number of the parameter PostgreSQL could not type, or None for any other error.

    >>> class E(Exception):
    ...     sqlstate = "42P18"
    >>> untyped_parameter(E("could not determine data type of parameter $2"))
    2
    """
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) not in _UNTYPED:
        return None
    found = _NUMBER.search(str(orig))
    return int(found.group(1)) if found else None
