"""Red team rth F5 on MariaDB: a view over a masked table carries no `USE INDEX` pin.

MariaDB read the view's body along the covering `score_name (score, name)` index (`score` masked,
`name` under utf8mb4_general_ci), so `MIN(name)` of rows 1, 2 (`Paris`, `paris`) answered the spelling
of the row of lower masked score, as MAX, GROUP BY, DISTINCT and GROUP_CONCAT(DISTINCT) did. Now a
query reading a view takes no text column's spelling as data: exact forms (GROUP BY, DISTINCT) or a
refusal (MIN/MAX, DISTINCT aggregates). INVOKER, DEFINER, TEMPTABLE views and views of views alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.maskcheck import enforce_masks, ordered_schema, prepare_masks
from mcpkit.sql.service import Masking, SqlService
from tests.sql.sql_support import MysqlScratch, masks_file, mysql_scratch, rows_or_message

pytestmark = pytest.mark.mysql

# the masked score ranks 2 < 4 < 1 < 3 (the lower-case spellings first)
ROWS = "(1, 'Paris', 'z@x', 50), (2, 'paris', 'a@x', 10), (3, 'Paris', 'k@x', 90), (4, 'paris', 'b@x', 30)"


def _serve(url: str, folder: Path, allow: tuple[str, ...] = ()) -> SqlService:
    engine = SqlEngine(url)
    try:
        policy, reflection, masked = prepare_masks(
            engine, masks_file(folder, "customers.email", "customers.score")
        )
        enforce_masks(engine, masked)
        known = ordered_schema(engine, reflection, policy, masked, allow)
    except BaseException:
        engine.close()
        raise
    return SqlService(engine, max_rows=50, timeout_s=10.0, masking=Masking(policy, known, masked))


@pytest.fixture(scope="module")
def maria(
    mysql_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MysqlScratch, SqlService]]:
    with mysql_scratch(mysql_url, "fixk_f5") as db:
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.customers (id int NOT NULL PRIMARY KEY,"
                " name varchar(20) COLLATE utf8mb4_general_ci NOT NULL,"
                " email varchar(80) NOT NULL, score int NOT NULL, KEY score_name (score, name))"
                " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            )
            c.execute(f"INSERT INTO {db.db}.customers VALUES {ROWS}")
            c.execute(f"ANALYZE TABLE {db.db}.customers")
            views = {
                "v": "SQL SECURITY INVOKER VIEW {d}.v AS SELECT id, name FROM {d}.customers",
                "vd": "SQL SECURITY DEFINER VIEW {d}.vd AS SELECT id, name FROM {d}.customers",
                "vt": "ALGORITHM=TEMPTABLE SQL SECURITY INVOKER VIEW {d}.vt AS"
                " SELECT id, name FROM {d}.customers",
                "vv": "SQL SECURITY INVOKER VIEW {d}.vv AS SELECT id, name FROM {d}.v",
            }
            for name, body in views.items():
                c.execute("CREATE " + body.format(d=db.db))
                c.execute(f"GRANT SELECT, SHOW VIEW ON {db.db}.{name} TO '{db.reader}'@'%'")
            c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
        service = _serve(db.reader_url, tmp_path_factory.mktemp("f5"))
        try:
            yield db, service
        finally:
            service.engine.close()


_PICK = "MIN and MAX of a computed text"
_DISTINCT_AGG = "aggregate of DISTINCT values other than count"


@pytest.mark.parametrize("view", ["v", "vd", "vt", "vv"])
def test_representatives_through_a_view_do_not_follow_the_masked_index(
    maria: tuple[MysqlScratch, SqlService], view: str
) -> None:
    _, service = maria
    where = "WHERE id + 0 IN (1, 2)"
    for sql, want in [
        (f"SELECT MIN(name) AS m FROM {view} {where}", _PICK),  # before: paris (row 2, score 10)
        (f"SELECT MAX(name) AS m FROM {view} {where}", _PICK),
        (f"SELECT GROUP_CONCAT(DISTINCT name) AS g FROM {view} {where}", _DISTINCT_AGG),
        (
            f"SELECT MIN(v.name) AS m FROM {view} v JOIN customers c ON c.id = v.id WHERE v.id + 0 IN (1, 2)",
            _PICK,
        ),
        (
            f"SELECT MIN(c.name) AS m FROM {view} v JOIN customers c ON c.id = v.id WHERE v.id + 0 IN (1, 2)",
            _PICK,
        ),
        (f"SELECT MIN(t.name) AS m FROM (SELECT id, name FROM {view}) t WHERE t.id + 0 IN (1, 2)", _PICK),
    ]:
        got = rows_or_message(service, sql)
        assert isinstance(got, str) and want in got, (sql, got)
    for sql in [
        f"SELECT name FROM {view} {where} GROUP BY name ORDER BY 1",
        f"SELECT DISTINCT name FROM {view} {where} ORDER BY 1",
    ]:  # the exact form is a key: both spellings, whatever the scan order (before: [['paris']])
        got = rows_or_message(service, sql)
        assert isinstance(got, list) and sorted(r[0] for r in got) == ["Paris", "paris"], (sql, got)


def test_what_prints_one_way_through_a_view_stays_answered(maria: tuple[MysqlScratch, SqlService]) -> None:
    _, service = maria
    assert rows_or_message(service, "SELECT MIN(id) AS m, MAX(id) AS x FROM v") == [[1, 4]]
    got = rows_or_message(service, "SELECT HEX(MIN(CAST(name AS BINARY))) AS m FROM v WHERE id + 0 IN (1, 2)")
    assert got == [["5061726973"]], got  # 'Paris' < 'paris' bytewise
    got = rows_or_message(service, "SELECT id, COUNT(*) AS n FROM v GROUP BY id ORDER BY id")
    assert isinstance(got, list) and len(got) == 4, got


def test_pins_reach_derived_tables_and_ctes(maria: tuple[MysqlScratch, SqlService]) -> None:
    """The base reference inside a derived table or CTE is pinned (`USE INDEX (PRIMARY)`): answered
    with the spelling of the lower id, not of the lower masked score."""
    _, service = maria
    for sql in [
        "SELECT MIN(name) AS m FROM customers WHERE id + 0 IN (1, 2)",
        "SELECT MIN(name) AS m FROM (SELECT id, name FROM customers) t WHERE id + 0 IN (1, 2)",
        "WITH t AS (SELECT id, name FROM customers) SELECT MIN(name) AS m FROM t WHERE id + 0 IN (1, 2)",
    ]:
        assert rows_or_message(service, sql) == [["Paris"]], sql


@pytest.fixture(scope="module")
def named_like(
    mysql_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MysqlScratch, SqlService]]:
    """customers read along `name_score (name, score)` unless pinned (review R9)."""
    with mysql_scratch(mysql_url, "fixk_r9") as db:
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.customers (id int NOT NULL PRIMARY KEY,"
                " name varchar(20) COLLATE utf8mb4_general_ci NOT NULL,"
                " email varchar(80) NOT NULL, score int NOT NULL, KEY name_score (name, score))"
                " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            )
            c.execute(f"INSERT INTO {db.db}.customers VALUES {ROWS}")
            c.execute(f"ANALYZE TABLE {db.db}.customers")
            c.execute(f"GRANT SELECT (id, name) ON {db.db}.customers TO '{db.reader}'@'%'")
        service = _serve(db.reader_url, tmp_path_factory.mktemp("r9"))
        try:
            yield db, service
        finally:
            service.engine.close()


def test_a_cte_named_like_the_masked_table_answers_pinned(
    named_like: tuple[MysqlScratch, SqlService],
) -> None:
    """R9: refused before ("rename the WITH query"); now the table inside the CTE is pinned and the
    CTE's own references are sent unhinted. `Paris` (row 1, the lower id), never `paris` (row 2, the
    lower masked score)."""
    db, service = named_like
    cte = "WITH customers AS (SELECT id, name FROM customers)"
    for sql in [
        f"{cte} SELECT MIN(name) AS m FROM customers WHERE id + 0 IN (1, 2)",
        f"{cte} SELECT name FROM customers WHERE id + 0 IN (1, 2) GROUP BY name",
        f"{cte} SELECT DISTINCT name FROM customers WHERE id + 0 IN (1, 2)",
        f"{cte} SELECT GROUP_CONCAT(DISTINCT name) AS g FROM customers WHERE id + 0 IN (1, 2)",
        "WITH a AS (SELECT id, name FROM customers), customers AS (SELECT id FROM a)"
        " SELECT MIN(a.name) AS m FROM a JOIN customers c ON c.id = a.id WHERE a.id + 0 IN (1, 2)",
        "SELECT MIN(c.name) AS m FROM customers c JOIN (WITH customers AS (SELECT 1 AS x) SELECT x"
        " FROM customers) t ON t.x = 1 WHERE c.id + 0 IN (1, 2)",
    ]:
        assert rows_or_message(service, sql) == [["Paris"]], sql
    with db.admin.cursor() as c:  # unpinned, the server reads along name_score: the lower score's
        c.execute(f"SELECT MIN(name) FROM {db.db}.customers WHERE id + 0 IN (1, 2)")
        assert c.fetchall() == (("paris",),)


def test_a_cte_named_like_the_masked_table_keeps_the_masks(
    named_like: tuple[MysqlScratch, SqlService],
) -> None:
    _, service = named_like
    for sql in [
        "WITH customers AS (SELECT id, email FROM customers) SELECT email FROM customers",
        "WITH a AS (SELECT id, email FROM customers), customers AS (SELECT 1 AS id, 'x' AS email)"
        " SELECT email FROM a",
        "WITH customers AS (SELECT id, email FROM customers), b AS (SELECT email FROM customers)"
        " SELECT email FROM b",
    ]:
        got = rows_or_message(service, sql)
        assert isinstance(got, str) or all(r == ["<masked>"] for r in got), (sql, got)
    # scopes MariaDB resolves differently from the standard stay refused
    for sql in [
        "WITH customers AS (SELECT 1 AS id, 'x' AS name) SELECT (WITH z AS (SELECT name FROM customers"
        " WHERE id + 0 IN (1, 2)) SELECT MIN(name) FROM z) AS m",
        "WITH RECURSIVE customers AS (SELECT id, name FROM customers) SELECT MIN(name) AS m FROM customers",
        "WITH Customers AS (SELECT id, name FROM customers) SELECT MIN(name) AS m FROM Customers",
    ]:
        got = rows_or_message(service, sql)
        assert isinstance(got, str) and "rename the WITH query" in got, (sql, got)
