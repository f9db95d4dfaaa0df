"""Which indexes a masked table may be read through on MySQL/MariaDB (`masking.scan_pins`).

InnoDB reads a table along the smallest covering index, which may be one over a masked column
(rtB F1-F4: `score_idx`), and stores the rows in PRIMARY KEY order (without one: the first UNIQUE
index of NOT NULL columns). Every reference to a masked table is sent with `USE INDEX (...)` of the
indexes whose columns the reader sees and are not masked; `USE INDEX ()` (no index: a scan in the
clustered order) when there is none. information_schema.STATISTICS shows a column-granted reader only
the index columns it may read (an index with a gap in SEQ_IN_INDEX holds a withheld one, one of only
withheld columns is not shown), and TABLE_CONSTRAINTS nothing: a PRIMARY KEY the reader does not see
whole may be over a masked column, so a table without a visible one is a start-up finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mcpkit.sql.profiles.findings import Finding
from mcpkit.sql.profiles.scan_order import ScanPin, pin_key, split_key

__all__ = ["mysql_scan_pins"]

_INDEXES: Final = """
SELECT INDEX_NAME, COLUMN_NAME, SEQ_IN_INDEX FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = :schema AND TABLE_NAME = :table
"""


def _clustered(key: str) -> Finding:
    return Finding(
        "clustered-masked",
        f"table {key} has no PRIMARY KEY of columns the reader sees unmasked: InnoDB stores its rows"
        " in the order of the key it has (or of a UNIQUE key), which may be a masked column's",
        f"give {key} a PRIMARY KEY on visible columns",
        f"clustered-order:{key}",
    )


def mysql_scan_pins(
    conn: Connection, masked: Mapping[str, frozenset[str]], default_schema: str | None
) -> tuple[dict[str, ScanPin], list[Finding]]:
    """Per masked table, its `USE INDEX` list; findings for a clustered key over a masked column."""
    pins: dict[str, ScanPin] = {}
    findings: list[Finding] = []
    for key, columns in sorted(masked.items()):
        schema, table = split_key(key)
        schema = schema or default_schema
        wanted = {c.casefold() for c in columns}
        shown: dict[str, list[tuple[int, str | None]]] = {}
        for index, column, seq in conn.execute(text(_INDEXES), {"schema": schema, "table": table}).all():
            shown.setdefault(str(index), []).append((int(seq), None if column is None else str(column)))
        visible = []
        for index, parts in sorted(shown.items()):
            seqs = sorted(s for s, _ in parts)
            whole = seqs == list(range(1, len(seqs) + 1))
            if whole and all(c is not None and c.casefold() not in wanted for _, c in parts):
                visible.append(index)
        if "PRIMARY" not in visible:
            findings.append(_clustered(key))
        pins[pin_key(schema, table)] = ScanPin(tuple(visible))
    return pins, findings
