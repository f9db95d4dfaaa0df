"""Red team rth F4 remainder on SQLite: columns whose declared collation or missing type SQLAlchemy drops.

`name TEXT COLLATE NOCASE`, `pad VARCHAR(9) COLLATE RTRIM` and a column with no type (`loose`, which
keeps 1 and 1.0 as written) were reflected as TEXT: min/max, GROUP BY and DISTINCT over them kept the
first scanned of equal values, and rows written in the masked e-mail order scan in that order. Views
copy the collation (`n`), or state one (`w`), or compute a typeless value (`x`). Now the stored forms
carry the collation (`profiles.sqlite_collations`) and such picks are refused or told apart.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from mcpkit.sql.analysis import profile_table
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masked_service, rows_or_message

_VIEW = (
    "CREATE VIEW v AS SELECT code, name AS n, CASE code WHEN 'c12' THEN 'b' WHEN 'c02' THEN 'B' END"
    " COLLATE NOCASE AS w, CASE code WHEN 'c12' THEN 1 WHEN 'c02' THEN 1.0 END AS x, email FROM people"
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    folder = tmp_path_factory.mktemp("collate_sqlite")
    con = sqlite3.connect(folder / "p.db")
    con.execute(
        "CREATE TABLE people (code TEXT PRIMARY KEY, name TEXT COLLATE NOCASE,"
        " pad VARCHAR(9) COLLATE RTRIM, loose, n INTEGER, email TEXT)"
    )
    # written in e-mail order: c12 ('b', 'b', 1) is scanned before c02 ('B', 'b ', 1.0)
    rows = [("c01", None, None, None, "a@x"), ("c12", "b", "b", 1, "b@x"), ("c02", "B", "b ", 1.0, "c@x")]
    con.executemany("INSERT INTO people VALUES (?, ?, ?, ?, 7, ?)", rows)
    con.execute(_VIEW)
    con.execute("CREATE VIEW v_all AS SELECT * FROM people")
    con.execute("CREATE VIEW v_sub AS SELECT s.nm, s.email FROM (SELECT name AS nm, email FROM people) AS s")
    con.commit()
    con.close()
    (folder / "masks.yaml").write_text("masks:\n  - people.email\n  - v*.email\n", encoding="utf-8")
    service = masked_service(f"sqlite:///{folder / 'p.db'}", folder / "masks.yaml")
    try:
        yield service
    finally:
        service.engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT min(name) AS m FROM people",
        "SELECT max(pad) AS m FROM people",
        "SELECT min(loose) AS m FROM people",
        "SELECT min(n) AS m FROM v",
        "SELECT max(w) AS m FROM v",
        "SELECT min(x) AS m FROM v",
        "SELECT min(name) AS m FROM v_all",
        "SELECT max(nm) AS m FROM v_sub",
    ],
)
def test_min_max_of_a_declared_collation_or_typeless_column_is_refused(service: SqlService, sql: str) -> None:
    """The answer was the first-scanned spelling ('b', 1: c12's, written before c02 in e-mail order)."""
    got = rows_or_message(service, sql)
    assert isinstance(got, str) and "MIN and MAX" in got, got


def test_groups_and_distinct_keep_each_spelling(service: SqlService) -> None:
    """GROUP BY / DISTINCT kept one group for 'b' and 'B' (or 'b' and 'b ', 1 and 1.0) spelled as the
    first scanned; now the exact forms tell them apart, whatever the order."""
    got = rows_or_message(service, "SELECT name, count(*) AS c FROM people GROUP BY name")
    assert got == [[None, 1], ["B", 1], ["b", 1]], got
    assert rows_or_message(service, "SELECT DISTINCT pad FROM people") == [[None], ["b"], ["b "]]
    assert rows_or_message(service, "SELECT DISTINCT x FROM v") == [[None], [1], [1.0]]
    union = rows_or_message(service, "SELECT name FROM people UNION SELECT 'x'")
    assert isinstance(union, str) and "UNION" in union, union


def test_plain_columns_and_the_profile_still_answer(service: SqlService) -> None:
    """A column of a declared type and the BINARY collation is left as it is; profile_table answers,
    leaving out the bounds masking refuses."""
    assert rows_or_message(service, "SELECT min(code) AS a, max(n) AS b FROM people") == [["c01", 7]]
    found = {c.name: c for c in profile_table(service, "people", call_id="p").columns}
    assert found["name"].min is None and found["name"].status == "profiled"
    assert found["n"].min == 7 and found["email"].status == "masked"
