"""Red team rtL F1: a declared collation was read only from the CREATE TABLE sqlglot could parse.

`WITHOUT ROWID`, `ON CONFLICT ...`, a type of many words (`UNSIGNED BIG TEXT`) or a DEFAULT before
the COLLATE made the statement unparsable (or a `Command`), and every column came back BINARY: over a
masked e-mail, `min(name)` of a NOCASE column answered the spelling scanned first (the e-mail order
of a WITHOUT ROWID table's index), and GROUP BY / DISTINCT kept one spelling. Now SQLite itself is
asked each column's collation (`profiles.sqlite_collations`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine

from mcpkit.sql.profiles.sqlite_collations import collations
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masked_service, rows_or_message

_DECLARED = [
    "CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT, name TEXT COLLATE NOCASE) WITHOUT ROWID",
    "CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT, name TEXT NOT NULL ON CONFLICT ABORT"
    " COLLATE NOCASE)",
    "CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT, name TEXT UNIQUE ON CONFLICT REPLACE COLLATE RTRIM)",
    "CREATE TABLE t (id INTEGER, email TEXT, name TEXT COLLATE NOCASE, PRIMARY KEY(id) ON CONFLICT IGNORE)",
    "CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT, name UNSIGNED BIG TEXT COLLATE NOCASE)",
    "CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT, name TEXT DEFAULT ('x') COLLATE NOCASE"
    " CHECK (name <> ''))",
]


@pytest.mark.parametrize("ddl", _DECLARED)
def test_sqlite_says_which_collation_a_column_has(ddl: str) -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        conn.exec_driver_sql(ddl)
        conn.exec_driver_sql("CREATE VIEW v AS SELECT name AS n, email FROM t")
        found = collations(conn, "t")
        assert found.get("name") in ("NOCASE", "RTRIM") and found.get("email", "BINARY") == "BINARY", found
        assert collations(conn, "v").get("n") == found["name"]
    engine.dispose()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    folder = tmp_path_factory.mktemp("rtl_collations")
    con = sqlite3.connect(folder / "c.db")
    con.execute(_DECLARED[0])
    con.execute("CREATE INDEX ix ON t (email, name)")
    spellings = ["bob", "Bob", "bOb", "boB", "BOb", "BoB", "bOB", "BOB"]
    emails = ["e5", "e4", "e6", "e8", "e1", "e2", "e7", "e3"]
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?)", [(i + 1, emails[i], s) for i, s in enumerate(spellings)]
    )
    con.commit()
    con.close()
    (folder / "masks.yaml").write_text("masks:\n  - t.email\n", encoding="utf-8")
    service = masked_service(f"sqlite:///{folder / 'c.db'}", folder / "masks.yaml")
    try:
        yield service
    finally:
        service.engine.close()


def test_min_of_a_nocase_column_of_a_without_rowid_table_is_refused(service: SqlService) -> None:
    """It answered 'BOb', the smallest e-mail's row (scanned first along the index)."""
    got = rows_or_message(service, "SELECT min(name) AS m FROM t WHERE id + 0 IN (1, 2, 3, 4, 5, 6, 7, 8)")
    assert isinstance(got, str) and "MIN and MAX" in got, got


def test_distinct_keeps_each_spelling(service: SqlService) -> None:
    got = rows_or_message(service, "SELECT DISTINCT name FROM t")
    assert isinstance(got, list) and len(got) == 8, got


def test_min_of_a_text_column_collated_binary_is_answered(service: SqlService) -> None:
    """Red team rtL L1: `min(name COLLATE BINARY)` (byte-exact over text affinity: equal only when
    identical) was refused as computed, leaving no route to MIN of a NOCASE column."""
    assert rows_or_message(service, "SELECT min(name COLLATE BINARY) AS m FROM t") == [["BOB"]]
    got = rows_or_message(service, "SELECT min(email COLLATE BINARY) AS m FROM t")
    assert isinstance(got, str), got  # the masked column itself stays refused
