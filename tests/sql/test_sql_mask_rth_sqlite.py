"""Red team rth on SQLite: aggregates that answer the scan order where a read is not pinned.

Rows written in the masked e-mail order (a TEXT primary key: rowid order is the e-mail order) are
read in that order by a full scan. avg() added exact integers in a double in scan order (F1); a
decimal literal `1.0`, a REAL, sent the split sum to its `TOTAL()` branch (F2); sum(DISTINCT)
overflowed or not with the order (F3); min/max, GROUP BY and DISTINCT kept the first-scanned of
values equal under NOCASE (F4).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masked_service, rows_or_message

BIG = 10000000000000000
MAX = 9223372036854775807


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    folder = tmp_path_factory.mktemp("rth_sqlite")
    con = sqlite3.connect(folder / "p.db")
    con.execute("CREATE TABLE people (code TEXT PRIMARY KEY, name TEXT, n INTEGER, r NUMERIC, email TEXT)")
    # written in e-mail order: c01, c12, c02, then the rest
    rows = [("c01", "a@x"), ("c12", "b@x"), ("c02", "c@x")] + [(f"c{i:02d}", f"d{i}@x") for i in range(3, 12)]
    con.executemany("INSERT INTO people VALUES (?, 'bob', 1, 1.5, ?)", rows)
    con.execute("CREATE TABLE odd (id INTEGER PRIMARY KEY, n INTEGER, email TEXT)")
    con.executemany("INSERT INTO odd VALUES (?, ?, 'e')", [(1, 1), (2, 1.5), (3, 1e300)])
    con.commit()
    con.close()
    (folder / "masks.yaml").write_text("masks:\n  - people.email\n  - odd.email\n", encoding="utf-8")
    service = masked_service(f"sqlite:///{folder / 'p.db'}", folder / "masks.yaml")
    try:
        yield service
    finally:
        service.engine.close()


def _case(first: str, second: str, up: str, one: str, down: str) -> str:
    """A value by row, read through a full scan (the concatenation keeps the primary key unused)."""
    whens = f"WHEN 'c01' THEN {up} WHEN '{first}' THEN {one} WHEN '{second}' THEN {down}"
    return f"CASE code || substr(name, 1, 0) {whens} ELSE 0 END"


def test_avg_of_integers_answers_alike_in_any_order(service: SqlService) -> None:
    """F1: 1.0 or 0.0 (times 12) as c12 came before c02 or not; now the exact sum over the count."""
    got = [
        rows_or_message(service, f"SELECT avg({_case(a, b, str(BIG), '1', str(-BIG))}) * 12 AS a FROM people")
        for a, b in [("c02", "c12"), ("c12", "c02")]
    ]
    assert got == [[[1.0]], [[1.0]]], got
    assert rows_or_message(
        service, "SELECT avg(n) AS a, avg(n) FILTER (WHERE code > 'c05') AS f FROM people"
    ) == [[1.0, 1.0]]
    assert rows_or_message(service, "SELECT avg(n) AS a FROM people WHERE code = 'none'") == [[None]]
    assert rows_or_message(service, "SELECT avg(n) OVER () AS a FROM people LIMIT 1") == [[1.0]]


def test_a_decimal_literal_is_not_an_exact_sum(service: SqlService) -> None:
    """F2: `1.0` is a REAL on SQLite; its sum went to TOTAL(), added in doubles in scan order."""
    got = rows_or_message(
        service, f"SELECT sum({_case('c02', 'c12', f'{BIG}.0', '1.0', f'-{BIG}.0')}) AS a FROM people"
    )
    assert isinstance(got, str) and "adds in the storage order" in got, got
    assert rows_or_message(service, "SELECT sum(1) AS s, sum(n * 2) AS t FROM people") == [[12, 24]]


def test_reals_in_numeric_columns_sum_alike_in_any_order(service: SqlService) -> None:
    """F2: a REAL stored in a NUMERIC or INTEGER column took the TOTAL() branch (2.0 or 1.5 with the
    order); now summed in fixed point, and a value too large for it fails the call whatever the order."""
    got = [
        rows_or_message(
            service, f"SELECT sum({_case(a, b, f'r * {BIG}', 'r', f'-r * {BIG}')}) AS s FROM people"
        )
        for a, b in [("c02", "c12"), ("c12", "c02")]
    ]
    assert got == [[[1.5]], [[1.5]]], got
    assert rows_or_message(service, "SELECT sum(n) AS s, avg(n) AS a FROM odd WHERE id < 3") == [[2.5, 1.25]]
    for sql in ["SELECT sum(n) AS s FROM odd", "SELECT avg(n) AS a FROM odd"]:
        got = rows_or_message(service, sql)
        assert isinstance(got, str) and "failed on the data" in got, (sql, got)


def test_sum_distinct_is_refused(service: SqlService) -> None:
    """F3: sum(DISTINCT) overflowed as c12 came before c02 or not."""
    for call in ["sum", "avg"]:
        got = rows_or_message(
            service,
            f"SELECT {call}(DISTINCT {_case('c02', 'c12', str(MAX), '1', str(-MAX))}) AS a FROM people",
        )
        assert isinstance(got, str) and "DISTINCT" in got, (call, got)
    assert rows_or_message(service, "SELECT count(DISTINCT n) AS c FROM people") == [[1]]


def _both(service: SqlService, template: str) -> list[object]:
    """`template` with {v} the value of c12 and c02 one way, then the other."""
    return [
        rows_or_message(
            service,
            template.format(v=f"CASE code || substr(name, 1, 0) WHEN '{a}' THEN 'b' WHEN '{b}' THEN 'B' END"),
        )
        for a, b in [("c12", "c02"), ("c02", "c12")]
    ]


def test_nocase_variants_keep_no_first_scanned_representative(service: SqlService) -> None:
    """F4: min/max and GROUP BY of values equal under NOCASE answered the spelling of c12 (the first
    scanned in e-mail order); F6: likewise 1 and 1.0 (integer, real). Now refused or told apart."""
    for call in ["min", "max"]:
        for got in _both(service, f"SELECT {call}({{v}} COLLATE NOCASE) AS m FROM people"):
            assert isinstance(got, str) and "MIN and MAX" in got, got
    number = "SELECT min(CASE code || substr(name, 1, 0) WHEN 'c12' THEN 1 WHEN 'c02' THEN 1.0 END) AS m"
    number += " FROM people"
    got = rows_or_message(service, number)
    assert isinstance(got, str) and "MIN and MAX" in got, got
    grouped = _both(service, "SELECT {v} COLLATE NOCASE AS k, count(*) AS n FROM people GROUP BY 1")
    assert grouped[0] == grouped[1] == [[None, 10], ["B", 1], ["b", 1]], grouped
    union = _both(service, "SELECT {v} COLLATE NOCASE AS k FROM people UNION SELECT 'x'")
    assert all(isinstance(g, str) and "UNION" in g for g in union), union
    assert rows_or_message(service, "SELECT min(code) AS m, max(n) AS x FROM people") == [["c01", 1]]


def test_wide_queries_judge_the_value_under_the_interrupt_jump(service: SqlService) -> None:
    """SQLite wraps each call of a query of many calls in `CASE WHEN 1 THEN f(x) END` before masking
    reads it: MIN of a column read from the table stays answered (the profile's own aggregate was
    refused, which reverted the first fix), MIN of values equal under NOCASE stays refused."""
    wide = ", ".join(f"min(code) AS a{i}, max(n) AS b{i}" for i in range(10))
    assert rows_or_message(service, f"SELECT {wide} FROM people") == [["c01", 1] * 10]
    for got in _both(service, f"SELECT {wide}, min({{v}} COLLATE NOCASE) AS m FROM people"):
        assert isinstance(got, str) and "MIN and MAX" in got, got


def test_profile_of_a_masked_table_reads_its_bounds(service: SqlService) -> None:
    """profile_table's own MIN/MAX over a masked SQLite table (the stdio demo test that reverted the
    first fix): answered, the masked column withheld."""
    from mcpkit.sql.analysis import profile_table

    found = {c.name: c for c in profile_table(service, "people", call_id="p").columns}
    assert (found["code"].min, found["code"].max, found["n"].min) == ("c01", "c12", 1)
    assert found["email"].status == "masked" and found["email"].min is None
