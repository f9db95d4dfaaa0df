"""PostgreSQL columns typed by a masked table's row: `snap accounts` holds every column of an
`accounts` row, the masked ones included (red team rt19mask F1: `SELECT * FROM snaps` answered the
e-mails). So does an array of that row type, a domain over it, a range over it, or a composite type
(a table's row included) with such an attribute, at any depth; and a column typed by the row of a
view over a masked column."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import DerivedMask
from mcpkit.sql.profiles.postgres.catalog_path import VISIBLE, on_path, reader_schemas
from mcpkit.sql.profiles.postgres.handed_on import VIEWS_OVER, masked_attributes

__all__ = ["row_type_copies"]

# Which type holds which (child, holder): arrays (typelem), domains (typbasetype), composites with
# such an attribute (a table's row included), ranges and multiranges over one. A masked table's row
# type and every type holding one are user types (OIDs from 16384), so only those edges are read.
# Then, from the row types of the masked tables (resolved as queries resolve them) and of the views
# over their masked columns (`handed_on.VIEWS_OVER`), every type that holds one, and the table columns of
# those types (a view's columns are the closure's: `masks.masked_routes`).
_ROW_TYPE_COLUMNS: Final = """
WITH RECURSIVE edges(child, holder) AS (
    SELECT typelem, oid FROM pg_catalog.pg_type WHERE typelem >= 16384
  UNION ALL
    SELECT typbasetype, oid FROM pg_catalog.pg_type WHERE typbasetype >= 16384
  UNION ALL
    SELECT a.atttypid, t.oid FROM pg_catalog.pg_type t
    JOIN pg_catalog.pg_attribute a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
    WHERE t.typrelid <> 0 AND a.atttypid >= 16384
  UNION ALL
    SELECT rngsubtype, rngtypid FROM pg_catalog.pg_range WHERE rngsubtype >= 16384
  UNION ALL
    SELECT rngsubtype, rngmultitypid FROM pg_catalog.pg_range WHERE rngsubtype >= 16384
), holds(typ, source) AS (
    SELECT c.reltype, c.oid FROM pg_catalog.pg_class c
    WHERE c.reltype <> 0 AND (c.oid = ANY(CAST(:views AS oid[])) OR c.oid IN (
        SELECT coalesce(to_regclass(quote_ident(k)), to_regclass(k))
        FROM unnest(CAST(:tables AS text[])) AS k))
  UNION
    SELECT e.holder, h.source FROM holds h JOIN edges e ON e.child = h.typ
)
SELECT n.nspname, c.relname, {visible},
       quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname,
       string_agg(DISTINCT s.relname, ', ')
FROM holds h
JOIN pg_catalog.pg_attribute a ON a.atttypid = h.typ AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid AND c.relkind IN ('r', 'p', 'f')
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_class s ON s.oid = h.source
GROUP BY n.nspname, c.relname, c.oid, a.attname
ORDER BY 4, 5
""".replace("{visible}", VISIBLE)


def row_type_copies(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[DerivedMask]:
    """The table columns whose type holds the row of a table with masked columns, or of a view over
    one, one mask per table."""
    tables = sorted(k for k, columns in masked.items() if columns)
    if not tables:
        return []
    relids, attnums = masked_attributes(conn, {table: masked[table] for table in tables})
    closure = conn.execute(text(VIEWS_OVER), {"relids": relids, "attnums": attnums}).all() if relids else []
    views = sorted({int(r[0]) for r in closure if r[3] in ("v", "m")})  # their rows hold one too
    found: dict[tuple[str, str], tuple[bool, str, set[str], set[str]]] = {}
    for schema, name, visible, qualified, column, sources in conn.execute(
        text(_ROW_TYPE_COLUMNS),
        {
            "tables": [on_path(conn, t) for t in tables],
            "views": views,
            "path": reader_schemas(conn, implicit=True),
        },
    ).all():
        entry = found.setdefault((str(schema), str(name)), (bool(visible), str(qualified), set(), set()))
        entry[2].add(str(column))
        entry[3].update(str(sources).split(", "))
    return [
        DerivedMask(
            name if visible else qualified,
            schema,
            name,
            frozenset(columns),
            "its type holds the row of " + ", ".join(sorted(sources)) + ", which holds a masked column",
        )
        for (schema, name), (visible, qualified, columns, sources) in found.items()
    ]
