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
