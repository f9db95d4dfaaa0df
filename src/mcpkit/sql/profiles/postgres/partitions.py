"""PostgreSQL partitions of a table partitioned by a masked column: read by its own name, a
partition tells which rows hold which masked value (LIST: the bound is the value; RANGE and HASH: a
bucket of it), with no masked column read (red team rt19mask F2: `SELECT id FROM patients_hiv`).
An inheritance child with a CHECK constraint of its own over a masked column (`CHECK (diagnosis =
'hiv')`, the partitioning of old) does the same.

Column privileges cannot withhold that, so such a partition (any level below the key) must not be
readable by the calls' identity at all: start-up and `doctor --mask` refuse one that is, and
`grant --mask` grants nothing on it. The rows stay readable through the partitioned table, whose
grants withhold the masked column (a query on it cannot select `tableoid` without SELECT on it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.base import Finding
from mcpkit.sql.profiles.postgres.catalog_path import on_path
from mcpkit.sql.profiles.postgres.handed_on import VIEWS_OVER

__all__ = ["BoundPartition", "bound_partitions", "partition_findings"]

# The masked table's partitions and inheritance children (resolved as queries resolve the name),
# each with its parent, its partition key (plain columns and the key's text, for expressions) where
# it is partitioned, its own CHECK constraints over a masked column and a parent where it is a child,
# its kind, and whether the current role, or a role it can SET ROLE to, can read any column of it.
_TREE: Final = """
WITH RECURSIVE tree(relid, parent) AS (
    SELECT coalesce(to_regclass(quote_ident(:table)), to_regclass(:table))::oid, CAST(NULL AS oid)
  UNION
    SELECT i.inhrelid, i.inhparent FROM pg_catalog.pg_inherits i JOIN tree t ON i.inhparent = t.relid
)
SELECT t.relid, t.parent, quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       n.nspname, c.relname, pg_catalog.pg_get_partkeydef(p.partrelid),
       ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = p.partrelid AND a.attnum = ANY(CAST(p.partattrs AS int2[]))),
       ARRAY(SELECT pg_catalog.pg_get_constraintdef(k.oid) FROM pg_catalog.pg_constraint k
             WHERE k.conrelid = c.oid AND k.contype = 'c' AND k.conislocal
               AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
                           AND a.attnum = ANY(k.conkey) AND a.attname = ANY(:masked))
             ORDER BY k.conname),
       (SELECT quote_ident(pn.nspname) || '.' || quote_ident(pc.relname) FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class pc ON pc.oid = i.inhparent
        JOIN pg_catalog.pg_namespace pn ON pn.oid = pc.relnamespace
        WHERE i.inhrelid = c.oid ORDER BY i.inhseqno LIMIT 1),
       c.relispartition,
       EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
               WHERE pg_has_role(current_user, r.oid, 'MEMBER')
                 AND has_schema_privilege(r.oid, n.oid, 'USAGE')
                 AND (has_table_privilege(r.oid, c.oid, 'SELECT')
                      OR has_any_column_privilege(r.oid, c.oid, 'SELECT')))
FROM tree t
JOIN pg_catalog.pg_class c ON c.oid = t.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_partitioned_table p ON p.partrelid = t.relid
"""
_WORDS: Final = re.compile(r'"((?:[^"]|"")+)"|(\w+)')  # quoted or plain names in a key's text


@dataclass(frozen=True)
class BoundPartition:
    """A partition or inheritance child whose rows are picked by a masked column: below a partition
    key over one, or at or below a child's own CHECK constraint over one (red team rt19mask F2:
    `patients_hiv () INHERITS (patients)` with `CHECK (diagnosis = 'hiv')`). `relid`, `name`
    (quoted, qualified), `schema` and `table` are its own; `kind` says which it is, `why` what picks
    its rows, `through` the parent that reads them with its own grants."""

    relid: int
    name: str
    schema: str
    table: str
    kind: str
    why: str
    through: str
    readable: bool


def _named(text_: str, plain: Iterable[str], wanted: set[str]) -> list[str]:
    words = {part.casefold() for pair in _WORDS.findall(text_) for part in pair if part}
    return sorted(wanted & ({str(c).casefold() for c in plain} | words))


def bound_partitions(conn: Connection, masked: Mapping[str, frozenset[str]]) -> list[BoundPartition]:
    """Every partition, at any level, of a table whose partition key reads a masked column, and
    every inheritance child (or partition) with a CHECK constraint of its own over one, with the
    tables below it."""
    found: dict[int, BoundPartition] = {}
    for table, columns in sorted(masked.items()):
        wanted = {c.casefold() for c in columns}
        rows = conn.execute(text(_TREE), {"table": on_path(conn, table), "masked": sorted(columns)}).all()
        children: dict[int, list[int]] = {}
        for row in rows:
            if row[1] is not None:
                children.setdefault(int(row[1]), []).append(int(row[0]))
        by_id = {int(row[0]): row for row in rows}
        for relid, _, name, _, _, keydef, plain, checks, parent, _, _ in rows:
            picked: list[tuple[list[int], str, str]] = []  # (the tables, why, through)
            hits = _named(str(keydef), plain, wanted) if keydef else []
            if hits:
                why = f"{name} is partitioned by masked column {hits[0]} ({keydef})"
                picked.append((list(children.get(int(relid), [])), why, str(name)))
            for check in checks if parent is not None else []:
                column = (_named(str(check), (), wanted) or sorted(wanted))[0]
                why = f"{name} has {check} over masked column {column}"
                picked.append(([int(relid)], why, str(parent)))
            for start, why, through in picked:
                below = list(start)
                while below:
                    child = below.pop()
                    below += children.get(child, [])
                    row = by_id[child]
                    if child not in found:
                        kind = "partition" if row[9] else "inheritance child"
                        found[child] = BoundPartition(
                            child, str(row[2]), str(row[3]), str(row[4]), kind, why, through, bool(row[10])
                        )
    return sorted(found.values(), key=lambda p: p.name)


def _view_findings(conn: Connection, partitions: list[BoundPartition], role: str) -> list[Finding]:
    """Views and materialized views that read such a partition (any column, transitively) with
    their owner's rights and that the role can read: they hand its rows on as the partition would."""
    out = []
    groups: dict[str, list[int]] = {}
    for p in partitions:
        groups.setdefault(p.why, []).append(p.relid)
    for why, relids in sorted(groups.items()):
        params = {"relids": relids, "attnums": [0] * len(relids)}
        for _, name, _, kind, exposed in conn.execute(text(VIEWS_OVER), params).all():
            if not exposed:
                continue
            what = "materialized view" if kind == "m" else "view"
            alt = "" if kind == "m" else f"; or ALTER VIEW {name} SET (security_invoker = true)"
            out.append(
                Finding(
                    "masked-column-partition",
                    f"{what} {name} reads a table whose rows are picked by a masked column ({why}) with "
                    "its owner's rights: its rows share a bound on that column's values",
                    f"REVOKE SELECT ON {name} FROM {role} (also from PUBLIC or the role that grants it{alt})",
                )
            )
    return out


def partition_findings(
    conn: Connection, masked: Mapping[str, frozenset[str]], others: list[Finding]
) -> list[Finding]:
    """One finding per such partition the calls' identity can read by name, with the REVOKE; the
    `others` findings that would grant it its unmasked columns are left out (they would not do)."""
    partitions = bound_partitions(conn, masked)
    if not partitions:
        return others
    readable = [p for p in partitions if p.readable]
    role = str(conn.execute(text("SELECT quote_ident(current_user)")).scalar())
    refused = tuple(f"REVOKE SELECT ON {p.name} FROM " for p in readable)
    kept = [f for f in others if not (f.code == "masked-column-readable" and f.fix.startswith(refused))]
    return (
        [
            Finding(
                "masked-column-partition",
                f"{p.kind} {p.name} can be read by its own name, and {p.why}: its rows share a bound on "
                "that column's values",
                f"REVOKE SELECT ON {p.name} FROM {role} (also from PUBLIC or the role that grants it; "
                f"the rows stay readable through {p.through})",
            )
            for p in readable
        ]
        + _view_findings(conn, partitions, role)
        + kept
    )
