"""Which indexes a masked table may be read through on MySQL/MariaDB (`masking.scan_pins`).

InnoDB reads a table along the smallest covering index, which may be one over a masked column
(rtB F1-F4: `score_idx`), and stores the rows in PRIMARY KEY order (without one: the first UNIQUE
index of NOT NULL columns). Every reference to a masked table is sent with `USE INDEX (...)` of the
indexes whose columns the reader sees and are not masked; `USE INDEX ()` (no index: a scan in the
clustered order) when there is none. information_schema.STATISTICS shows a column-granted reader only
the index columns it may read (an index with a gap in SEQ_IN_INDEX holds a withheld one, one of only
withheld columns is not shown), and TABLE_CONSTRAINTS nothing: a PRIMARY KEY the reader does not see
whole may be over a masked column, so a table without a visible one is a start-up finding. So is a
table of another storage engine (Aria, MyISAM, MEMORY: a heap read in the order its rows were written,
which no hint changes; red team rte F2). An IGNORED index (MariaDB 10.6+) or an invisible one (MySQL 8)
is not listed: the server rejects a hint naming it (rte L1: every call failed).

Views and byte-exact columns are described too (`hinted=False`: no hint), for the representatives
of a query that reads a view (`profiles.mysql.view_pins`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection, RowMapping

from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.mysql.view_pins import exact_columns, unpinned_views
from mcpkit.sql.profiles.scan_order import ScanPin, partition_finding, pin_key, split_key

__all__ = ["mysql_scan_pins", "partition_order_findings"]

_NAME: Final = r"`(?:[^`]|``)+`"  # a backquoted name, as MariaDB prints the columns an expression reads
_INDEXES: Final = """
SELECT * FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = :schema AND TABLE_NAME = :table
"""
_ENGINE: Final = """
SELECT ENGINE, INDEX_LENGTH FROM information_schema.TABLES
WHERE TABLE_SCHEMA = :schema AND TABLE_NAME = :table AND TABLE_TYPE = 'BASE TABLE'
"""


def _clustered(key: str) -> Finding:
    return Finding(
        "clustered-masked",
        f"table {key} has no PRIMARY KEY of columns the reader sees unmasked: InnoDB stores its rows"
        " in the order of the key it has (or of a UNIQUE key), which may be a masked column's",
        f"give {key} a PRIMARY KEY on visible columns",
        f"clustered-order:{key}",
    )


def _heap(key: str, engine: str) -> Finding:
    return Finding(
        "clustered-masked",
        f"table {key} is stored by the {engine} engine in the order its rows were written, which no index"
        " hint changes and which may follow a masked column",
        f"convert {key} to InnoDB with a PRIMARY KEY on visible columns",
        f"clustered-order:{key}",
    )


# Partitioning expressions (red team mask17 F3: partitions are scanned in order, so the scan order
# follows a key over a masked column); MariaDB quotes the columns they read with backquotes.
_PARTITIONED = """
SELECT DISTINCT PARTITION_METHOD, PARTITION_EXPRESSION, SUBPARTITION_EXPRESSION
FROM information_schema.PARTITIONS
WHERE TABLE_SCHEMA = coalesce(:schema, DATABASE()) AND TABLE_NAME = :table
  AND PARTITION_EXPRESSION IS NOT NULL
"""


def partition_order_findings(
    conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None = None
) -> list[Finding]:
    """One finding per masked table partitioned (or subpartitioned) by an expression that reads a
    masked column: its partitions are scanned in order, so early stops and picks follow the masked
    values (`--allow partition-order:T`)."""
    out = []
    for key, columns in sorted(masked.items()):
        schema, table = split_key(key)
        wanted = {c.casefold() for c in columns}
        where = {"schema": schema or default_schema, "table": table}
        for method, *exprs in conn.execute(text(_PARTITIONED), where).all():
            text_ = " ".join(str(e) for e in exprs if e is not None)
            reads = {m[1:-1].replace("``", "`").casefold() for m in re.findall(_NAME, text_)}
            reads |= {w.casefold() for w in re.findall(r"\w+", text_)}
            hits = sorted(wanted & reads)
            if hits:
                out.append(partition_finding(key, hits[0], f"{method} ({text_})"))
                break
    return out


def _usable(row: RowMapping) -> bool:
    """Not one the optimizer ignores (MariaDB `IGNORED`, MySQL 8 `IS_VISIBLE`): a hint naming one fails."""
    return (
        str(row.get("IGNORED") or "NO").upper() != "YES"
        and str(row.get("IS_VISIBLE") or "YES").upper() != "NO"
    )


def mysql_scan_pins(
    conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None
) -> tuple[dict[str, ScanPin], list[Finding]]:
    """Per masked table, its `USE INDEX` list; findings for a clustered key over a masked column and a
    partitioning over one (`partition_order_findings`)."""
    pins: dict[str, ScanPin] = {}
    findings: list[Finding] = []
    follows: set[tuple[str, str]] = set()  # may be read along an index over a masked column
    for key, columns in sorted(masked.items()):
        schema, table = split_key(key)
        schema = schema or default_schema
        wanted = {c.casefold() for c in columns}
        shown: dict[str, list[tuple[int, str | None]]] = {}
        ignored: set[str] = set()
        where = {"schema": schema, "table": table}
        for row in conn.execute(text(_INDEXES), where).mappings().all():
            column = row["COLUMN_NAME"]
            part = (int(row["SEQ_IN_INDEX"]), None if column is None else str(column))
            shown.setdefault(str(row["INDEX_NAME"]), []).append(part)
            if not _usable(row):
                ignored.add(str(row["INDEX_NAME"]))
        visible = []
        for index, parts in sorted(shown.items()):
            seqs = sorted(s for s, _ in parts)
            whole = seqs == list(range(1, len(seqs) + 1))
            if (
                whole
                and index not in ignored
                and all(c is not None and c.casefold() not in wanted for _, c in parts)
            ):
                visible.append(index)
        engine, secondary = conn.execute(text(_ENGINE), where).one_or_none() or (None, None)
        if engine is not None and str(engine).casefold() != "innodb":
            findings.append(_heap(key, str(engine)))
        elif "PRIMARY" not in visible:
            findings.append(_clustered(key))
        if engine is None or str(engine).casefold() != "innodb" or "PRIMARY" not in visible or secondary != 0:
            follows.add((str(schema).casefold(), table.casefold()))
        pins[pin_key(schema, table)] = ScanPin(tuple(visible))
    if pins:
        _describe(conn, pins, follows, {str(default_schema or "")} | {s for s, _ in follows})
    return pins, findings + partition_order_findings(conn, masked, default_schema)


def _describe(
    conn: Connection, pins: dict[str, ScanPin], follows: set[tuple[str, str]], schemas: set[str]
) -> None:
    """Add, in place, an unhinted entry for each view (whether it `follows`) and each relation with
    byte-exact columns; a masked table's pin gets its exact columns. A view named like a masked table
    but for case (lower_case_table_names 0) shares its pin and counts as following."""
    exact = exact_columns(conn, {s for s in schemas if s})
    for (schema, name), counts in unpinned_views(conn, follows).items():
        key = pin_key(schema, name)
        if key in pins:
            pins[key] = replace(pins[key], follows=True, exact=frozenset())
            exact.pop((schema, name), None)
            continue
        pins[key] = ScanPin(hinted=False, follows=counts, exact=exact.pop((schema, name), frozenset()))
    for (schema, name), columns in exact.items():
        key = pin_key(schema, name)
        found = pins.get(key)
        pins[key] = ScanPin(hinted=False, exact=columns) if found is None else replace(found, exact=columns)
