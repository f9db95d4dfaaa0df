"""Red team rte on SQLite: reads whose order may follow a masked column's index.

A query's own reference to a masked table is sent `NOT INDEXED`, but a view's stored body is not:
through `CREATE VIEW v AS SELECT id, name FROM customers` SQLite reads `customers` along the
covering index on the masked `score`. SQLite's `total()` (a sum always added in doubles) was not
taken for a floating-point sum, so its bits told which ids were read after both +-1e30 rows: the
score ranking in about 4 calls a row; `total(x) OVER ()` was taken for an unknown window function
and given a completed ORDER BY, which made it a running total (a wrong answer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import enforce_masks, ordered_schema, prepare_masks
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import masks_file, rows_or_message

# id -> score: the masked ranking differs from the id order
SCORES = {1: 50.5, 2: 10.5, 3: 90.5, 4: 30.5, 5: 70.5, 6: 20.5, 7: 80.5, 8: 60.5}


def _serve(url: str, folder: Path) -> SqlService:
    """What `serve --mask` does at start-up (`assemble.equip`)."""
    engine = SqlEngine(url)
    try:
        rules = masks_file(folder, "customers.email", "customers.score")
        policy, reflection, masked = prepare_masks(engine, rules)
        enforce_masks(engine, masked)
        known = ordered_schema(engine, reflection, policy, masked, ())
    except BaseException:
        engine.close()
        raise
    return SqlService(engine, max_rows=50, timeout_s=10.0, masking=Masking(policy, known, masked))


def _sent(service: SqlService, sql: str) -> str:
    """The SQL a query was sent as (its scan pins: `NOT INDEXED`)."""
    seen: dict[str, object] = {}
    service.query(sql, call_id="t", note=lambda **f: seen.update(f))
    return str(seen["sql"])


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    folder = tmp_path_factory.mktemp("rte_sqlite")
    con = sqlite3.connect(folder / "c.db")
    con.execute(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL,"
        " email TEXT NOT NULL, score REAL NOT NULL)"
    )
    con.executemany(
        "INSERT INTO customers VALUES (?, ?, ?, ?, ?)",
        [(i, f"n{i}", f"c{i % 2}", f"e{s}@x", s) for i, s in SCORES.items()],
    )
    con.execute("CREATE INDEX customers_score ON customers (score, id)")
    con.execute("CREATE VIEW v_names AS SELECT id, name FROM customers")
    con.commit()
    con.close()
    served = _serve(f"sqlite:///{folder / 'c.db'}", folder)
    try:
        yield served
    finally:
        served.engine.close()


def test_total_through_a_view_does_not_follow_the_masked_index(service: SqlService) -> None:
    """Before: 442.0 = 2^4 + 2^1 + 2^8 + 2^5 + 2^7 + 2^3, the ids after 2 and 6 in score order."""
    by_score = sorted(SCORES, key=SCORES.__getitem__)
    for x, r in [(2, 6), (5, 3), (4, 8)]:
        last = max(by_score.index(x), by_score.index(r))
        masked_order = sum(2.0**i for i in by_score[last + 1 :])
        for source in ("v_names", "customers"):
            got = rows_or_message(
                service,
                f"SELECT total(CASE id WHEN {x} THEN 1e30 WHEN {r} THEN -1e30 ELSE power(2, id) END) AS s"
                f" FROM {source}",
            )
            refused = isinstance(got, str) and "adds in the storage order" in got
            assert refused, (source, x, r, got, masked_order)


def test_total_over_the_whole_partition_is_not_a_running_total(service: SqlService) -> None:
    assert rows_or_message(service, "SELECT total(id) OVER () AS s FROM v_names LIMIT 3") == [[36.0]] * 3
    got = rows_or_message(service, "SELECT city, total(id) OVER (PARTITION BY city) AS s FROM customers")
    assert sorted(map(tuple, got)) == [("c0", 20.0)] * 4 + [("c1", 16.0)] * 4  # type: ignore[arg-type]
    assert rows_or_message(service, "SELECT total(id) AS s FROM (SELECT 1 AS id)") == [
        [1.0]
    ]  # no masked read


def test_a_cte_named_like_the_masked_table_does_not_unpin_it(tmp_path: Path) -> None:
    """rte F1: a CTE named `customers` anywhere in the query took `NOT INDEXED` off the real table's
    reference; GROUP BY city then kept the spelling of the lower masked score (along city_score)."""
    con = sqlite3.connect(tmp_path / "f1.db")
    con.executescript(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT COLLATE NOCASE, email TEXT,"
        " score INTEGER);"
        "INSERT INTO customers VALUES (1, 'n1', 'Paris', 'z@x', 50), (2, 'n2', 'paris', 'a@x', 10),"
        " (3, 'n3', 'Paris', 'k@x', 90), (4, 'n4', 'paris', 'b@x', 30);"
        "CREATE INDEX customers_city_score ON customers (city, score);"
    )
    con.commit()
    con.close()
    service = _serve(f"sqlite:///{tmp_path / 'f1.db'}", tmp_path)
    try:
        plain = "SELECT city, count(*) AS n FROM customers c WHERE c.id + 0 IN (1, 2) GROUP BY city"
        shadowed = (
            "SELECT city, count(*) AS n FROM customers c JOIN (WITH customers AS (SELECT 1 AS x) SELECT x"
            " FROM customers) t ON t.x = 1 WHERE c.id + 0 IN (1, 2) GROUP BY city"
        )
        # 'Paris' = 'paris' under NOCASE: told apart by their exact forms now (rth F4); the pin is read
        # in the SQL sent, the group's spelling no longer following the scan
        for sql in (plain, shadowed):
            assert rows_or_message(service, sql) == [["Paris", 1], ["paris", 1]]
            assert "customers AS c NOT INDEXED" in _sent(service, sql), sql  # before: unpinned
        own = "WITH customers AS (SELECT 1 AS x UNION ALL SELECT 2) SELECT count(*) AS n FROM customers"
        assert rows_or_message(service, own) == [[2]]  # NOT INDEXED suits a CTE's name as well
    finally:
        service.engine.close()


def test_an_expression_index_over_a_non_word_masked_name_is_pinned(tmp_path: Path) -> None:
    """rte F4: `lower("e-mail")` was read as the words e and mail: no NOT INDEXED, and GROUP BY city kept
    the spelling of the smaller masked e-mail (along the expression index)."""
    con = sqlite3.connect(tmp_path / "f4.db")
    con.executescript(
        'CREATE TABLE contacts (id INTEGER PRIMARY KEY, city TEXT COLLATE NOCASE, "e-mail" TEXT);'
        "INSERT INTO contacts VALUES (1, 'Paris', 'zed@x'), (2, 'paris', 'amy@x'), (3, 'Paris', 'aaa@x'),"
        " (4, 'paris', 'bob@x');"
        'CREATE INDEX contacts_city_mail ON contacts (city, lower("e-mail"));'
    )
    con.commit()
    con.close()
    (tmp_path / "masks.yaml").write_text('masks:\n  - "contacts.e-mail"\n', encoding="utf-8")
    engine = SqlEngine(f"sqlite:///{tmp_path / 'f4.db'}")
    try:
        policy, reflection, masked = prepare_masks(engine, str(tmp_path / "masks.yaml"))
        enforce_masks(engine, masked)
        known = ordered_schema(engine, reflection, policy, masked, ())
        service = SqlService(engine, max_rows=50, timeout_s=10.0, masking=Masking(policy, known, masked))
        for ids in ["2, 3", "1, 2"]:  # each spelling its own group now (rth F4); the pin in the SQL sent
            sql = f"SELECT city, count(*) AS n FROM contacts WHERE id + 0 IN ({ids}) GROUP BY city"
            assert rows_or_message(service, sql) == [["Paris", 1], ["paris", 1]], ids
            assert "contacts NOT INDEXED" in _sent(service, sql), ids
    finally:
        engine.close()


def test_an_index_added_while_serving_is_pinned(tmp_path: Path) -> None:
    """rte F3: pins were reflected at start-up only; an index over (city, score) created while serving
    was then used unpinned (the catalog re-verification re-checked masks and views, not pins)."""
    import argparse

    from mcpkit.sql import cli as sqlcli

    db = tmp_path / "f3.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT COLLATE NOCASE, email TEXT,"
        " score INTEGER);"
        "INSERT INTO customers VALUES (1, 'n1', 'Paris', 'z@x', 50), (2, 'n2', 'paris', 'a@x', 10),"
        " (3, 'n3', 'Paris', 'k@x', 90), (4, 'n4', 'paris', 'b@x', 30);"
    )
    con.commit()
    parser = argparse.ArgumentParser()
    sqlcli.register(parser.add_subparsers(dest="command"))
    rules = masks_file(tmp_path, "customers.email", "customers.score")
    dsn = f"sqlite:///{db}"
    args = parser.parse_args(
        ["sql", "query", "--dsn", dsn, "--mask", rules, "--catalog-check-interval", "0", "SELECT 1"]
    )
    args.allow, args.allow_function = sqlcli.opt_ins(args)
    service = sqlcli._service(args, 1000)
    sql = "SELECT city, count(*) AS n FROM customers WHERE id + 0 IN (1, 2) GROUP BY city"
    try:
        assert rows_or_message(service, sql) == [["Paris", 1], ["paris", 1]]  # exact forms (rth F4)
        con.execute("CREATE INDEX customers_city_score ON customers (city, score)")
        con.commit()
        assert rows_or_message(service, sql) == [["Paris", 1], ["paris", 1]]
        assert "customers NOT INDEXED" in _sent(service, sql)  # before: the new index unpinned
    finally:
        con.close()
        service.engine.close()


def test_a_sum_of_round_stays_refused_on_sqlite(service: SqlService) -> None:
    """rte L3 opened `SUM(ROUND(x))` of exact values on MariaDB; SQLite's round() answers a double."""
    got = rows_or_message(service, "SELECT sum(round(id)) AS s FROM v_names")
    assert isinstance(got, str) and "adds in the storage order" in got, got
    assert rows_or_message(service, "SELECT sum(id) AS s FROM v_names") == [[36]]


def test_an_integer_sum_overflows_alike_in_any_order(tmp_path: Path) -> None:
    """rte F5: SQLite's integer sum fails when a partial sum overflows, so MAX, 1 and -MAX on three rows
    failed or answered 1 as the rows were read (here written in the masked e-mail order: p2, p4, p1,
    p3). Now summed in halves: 1 whatever the order; the sums answer as before otherwise."""
    con = sqlite3.connect(tmp_path / "f5.db")
    con.execute("CREATE TABLE people (pid TEXT PRIMARY KEY, city TEXT, email TEXT)")
    con.executemany(
        "INSERT INTO people VALUES (?, ?, ?)",
        [("p2", "paris", "a@x"), ("p4", "paris", "b@x"), ("p1", "Paris", "c@x"), ("p3", "Paris", "d@x")],
    )
    con.commit()
    con.close()
    (tmp_path / "masks.yaml").write_text("masks:\n  - people.email\n", encoding="utf-8")
    engine = SqlEngine(f"sqlite:///{tmp_path / 'f5.db'}")
    try:
        policy, reflection, masked = prepare_masks(engine, str(tmp_path / "masks.yaml"))
        enforce_masks(engine, masked)
        known = ordered_schema(engine, reflection, policy, masked, ())
        service = SqlService(engine, max_rows=50, timeout_s=10.0, masking=Masking(policy, known, masked))
        big = 9223372036854775807
        for up, one, down in [("p2", "p4", "p1"), ("p4", "p3", "p2")]:  # overflowed on the first only
            value = f"CASE pid || city WHEN '{up}paris' THEN {big} WHEN '{one}paris' THEN 1"
            value += f" WHEN '{up}Paris' THEN {big} WHEN '{one}Paris' THEN 1"
            value += f" WHEN '{down}Paris' THEN -{big} WHEN '{down}paris' THEN -{big} ELSE 0 END"
            assert rows_or_message(service, f"SELECT sum({value}) AS s FROM people") == [[1]], (up, one, down)
            window = f"SELECT sum({value}) OVER () AS s FROM people LIMIT 1"  # DISTINCT: 1 = 1.0 (rth F4)
            assert rows_or_message(service, window) == [[1]], (up, one, down)
        got = rows_or_message(service, "SELECT sum(length(pid)) AS s, sum(NULL) AS n, sum(length(pid)) FILTER"
                   " (WHERE pid > 'p2') AS f FROM people")  # fmt: skip
        assert got == [[8, None, 4]], got
        assert rows_or_message(service, f"SELECT sum({big}) AS s FROM people") == [
            [4 * float(big)]
        ]  # was an error
    finally:
        engine.close()


def test_review_r10_pins_moving_on_every_run_fail_the_call_after_one_more_run(service: SqlService) -> None:
    """review R10: a call whose scan pins moved while it ran was run again by recursion, each run with
    its whole timeout and with no end; now once more, in what is left of the timeout, then it fails."""
    from mcpkit.sql.errors import QueryFailed

    masking = service.masking
    assert masking is not None and masking.schema.scan_pins
    original = masking.schema.scan_pins
    pin = next(iter(original.values()))
    runs: list[str] = []

    def note(**seen: object) -> None:  # a catalog change re-pinning while each run is under way
        if "sql" in seen:
            runs.append(str(seen["sql"]))
            masking.schema.scan_pins = {**original, f"main.review_moved_{len(runs)}": pin}

    try:
        with pytest.raises(QueryFailed) as info:
            service.query("SELECT id, name FROM customers", call_id="r10", note=note)
        assert info.value.kind == "other"
        assert len(runs) == 2
    finally:
        masking.schema.scan_pins = original
