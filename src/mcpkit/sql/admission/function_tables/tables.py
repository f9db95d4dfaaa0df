"""The table of each engine, and the never lists the engines' own checks read."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import (
    FunctionTable,
    RelationRule,
    SearchBounds,
    ValueRule,
    mysql,
    postgres,
    postgres_catalogs,
    postgres_copies,
    sqlite,
)
from mcpkit.sql.admission.function_tables.mysql import MYSQL
from mcpkit.sql.admission.function_tables.postgres import POSTGRES
from mcpkit.sql.admission.function_tables.sqlite import SQLITE

__all__ = [
    "COLLECTING_AGGREGATES",
    "DENYLISTS",
    "EXPRESSION_COPIES",
    "MERGE_WORK",
    "NEVER_RELATIONS",
    "NEVER_VALUES",
    "SIZE_BOUNDS",
    "TABLES",
    "table_for",
]

TABLES: Final[dict[str, FunctionTable]] = {"postgres": POSTGRES, "mysql": MYSQL, "sqlite": SQLITE}

# Any other dialect (best effort, unverified): what all three allow, and what any of them never allows.
_GENERIC: Final = FunctionTable(
    "generic", tuple(f for t in TABLES.values() for f in t.families if f.verdict != "absent")
)

DENYLISTS: Final[dict[str, frozenset[str]]] = {name: table.never for name, table in TABLES.items()}
"""Per dialect, the never-allowed names and patterns (no option admits these)."""


NEVER_RELATIONS: Final[dict[str, tuple[RelationRule, ...]]] = {
    "postgres": postgres.NEVER_RELATIONS,
    "mysql": mysql.NEVER_RELATIONS,
    "sqlite": sqlite.NEVER_RELATIONS,
    # SQLite has no view of other connections or server internals.
}
"""Per dialect, the relations no query may read (other dialects: every engine's rules)."""

NEVER_VALUES: Final[dict[str, tuple[ValueRule, ...]]] = {"postgres": postgres_catalogs.CATALOG_VALUES}
"""Per dialect, the value columns of readable relations no query may read (other dialects: every
engine's rules)."""


SIZE_BOUNDS: Final[dict[str, SearchBounds]] = {"postgres": postgres.SIZE_BOUNDS, "mysql": mysql.SIZE_BOUNDS}
"""Per dialect, the string searches that admission bounds (SQLite's own replace them in Python,
checking the deadline: `profiles.sqlite_text`); other dialects: none."""


def table_for(dialect: str) -> FunctionTable:
    """The reviewed table of `dialect` (a sqlglot dialect name); other dialects get a generic one.

    >>> table_for("postgres").lookup("pg_sleep").verdict
    'never'
    """
    return TABLES.get(dialect, _GENERIC)


COLLECTING_AGGREGATES: Final[dict[str, frozenset[str]]] = {"postgres": postgres.COLLECTING_AGGREGATES}
"""Per dialect, the aggregates whose memory admission counts (MariaDB's session memory cap and
`group_concat_max_len` bound its own; SQLite's heap limit its)."""


EXPRESSION_COPIES: Final[dict[str, Callable[[exp.Expr], Mapping[str, int]]]] = {
    "postgres": postgres_copies.copies
}
"""Per dialect, how many times the engine copies each operand of an expression while compiling it
(PostgreSQL's BETWEEN and IN); other dialects (SQLite and MariaDB, measured flat): none."""


MERGE_WORK: Final[dict[str, int]] = {"postgres": 200_000}
"""Per dialect, the planner work (`admission.merge_work`: width x chain length over the scopes) a
query may cost: PostgreSQL pulls each level's target list up with no interrupt check (red team
rt33a F4); other dialects: not bounded."""
