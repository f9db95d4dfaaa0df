"""Review R6 (after rtC F2-F4): a WHERE of more than 16 comparisons of columns with literals, each
kept unwrapped for its index, made a run that could not be split and was refused ("over 16 calls or
comparisons"), an ordinary filter among them. Past the limit such conditions are wrapped too (they
lose their index; the run gets its jumps), and the answer is the query's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcpkit.sql.admission.admit import admit

COLUMNS = [f"c{i}" for i in range(20)]
QUERIES = [
    "SELECT id FROM t WHERE " + " AND ".join(f"c{i} >= {i}" for i in range(20)) + " ORDER BY id",
    "SELECT id FROM t WHERE "
    + " OR ".join(f"(c{i} BETWEEN {i + 3} AND {i + 4})" for i in range(20))
    + " ORDER BY id",
]


@pytest.mark.parametrize("sql", QUERIES, ids=["conjuncts", "ranges"])
def test_many_conditions_on_columns_are_wrapped_not_refused(sql: str, tmp_path: Path) -> None:
    sent = admit(sql, "sqlite").sql
    assert sent.count("CASE WHEN 1 THEN") == 4, sent  # 20 conditions, 16 keep their index
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, {', '.join(COLUMNS)})")
    conn.executemany(
        f"INSERT INTO t VALUES (?, {', '.join('?' * len(COLUMNS))})",
        [(r, *[(r * 7 + i) % 25 for i in range(len(COLUMNS))]) for r in range(40)],
    )
    assert conn.execute(sent).fetchall() == conn.execute(sql).fetchall() != []
    conn.close()
