"""Column-level grants for `mcpkit sql grant --mask FILE`: the reader gets no masked column.

`mcpkit sql grant` writes `GRANT SELECT ON schema.table TO reader` per table; with masks, each
statement on a table with masked columns becomes `GRANT SELECT (the, other, columns) ON ...`, which
is what `serve --mask` verifies at start-up (`Profile.use_masks`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import Final

from mcpkit.sql.masking.policy import MaskPolicy

__all__ = ["column_grants", "granted_tables", "without_tables"]

_GRANT: Final = re.compile(r"GRANT SELECT ON (?P<name>\S+) TO (?P<to>.+)", re.IGNORECASE)
_ANY_GRANT: Final = re.compile(r"GRANT SELECT (?:\(.*\) )?ON (?P<name>\S+) TO .+", re.IGNORECASE)
_PART: Final = re.compile(r'"((?:[^"]|"")*)"|`((?:[^`]|``)*)`|([^."`]+)')


def _parts(name: str) -> list[str]:
    return [
        q.replace('""', '"') if q else (b.replace("``", "`") if b else p) for q, b, p in _PART.findall(name)
    ]


def column_grants(
    script: Sequence[str],
    policy: MaskPolicy,
    columns_of: Callable[[str | None, str], list[str]],
    quote: Callable[[str], str],
) -> list[str]:
    """The script with table-wide SELECT grants narrowed to the unmasked columns.

    >>> cols = lambda schema, table: ["id", "email", "name"]
    >>> column_grants(['GRANT SELECT ON "crm"."customers" TO "r"'], MaskPolicy.of(["*.email"]),
    ...               cols, lambda c: f'"{c}"')
    ['GRANT SELECT ("id", "name") ON "crm"."customers" TO "r"']

    Args:
        script: The grant script's statements.
        policy: The masks.
        columns_of: (schema, table) -> the table's column names, in order.
        quote: Quotes a column name for the database.
    """
    out = []
    for statement in script:
        found = _GRANT.fullmatch(statement.strip())
        if found is None:
            out.append(statement)
            continue
        parts = _parts(found["name"])
        schema, table = (parts[-2] if len(parts) > 1 else None), parts[-1]
        names = columns_of(schema, table)
        masked = policy.masked_columns(schema, table, names)
        if not masked:
            out.append(statement)
            continue
        kept = ", ".join(quote(c) for c in names if c not in masked)
        if kept:
            out.append(f"GRANT SELECT ({kept}) ON {found['name']} TO {found['to']}")
    return out


def granted_tables(script: Sequence[str]) -> list[tuple[str | None, str]]:
    """`(schema, table)` of each table-wide SELECT grant in the script.

    >>> granted_tables(['CREATE ROLE "r"', 'GRANT SELECT ON "crm"."customers" TO "r"'])
    [('crm', 'customers')]
    """
    out = []
    for statement in script:
        found = _GRANT.fullmatch(statement.strip())
        if found is not None:
            parts = _parts(found["name"])
            out.append(((parts[-2] if len(parts) > 1 else None), parts[-1]))
    return out


def without_tables(script: Sequence[str], tables: Collection[tuple[str | None, str]]) -> list[str]:
    """The script without its SELECT grants (table-wide or on columns) on `tables` ((schema, table)).

    >>> script = ['GRANT SELECT ("id") ON "s"."p1" TO "r"', 'GRANT SELECT ON s.t TO "r"']
    >>> without_tables(script, [("s", "p1")])
    ['GRANT SELECT ON s.t TO "r"']
    """
    out = []
    for statement in script:
        found = _ANY_GRANT.fullmatch(statement.strip())
        if found is not None:
            parts = _parts(found["name"])
            if ((parts[-2] if len(parts) > 1 else None), parts[-1]) in tables:
                continue
        out.append(statement)
    return out
