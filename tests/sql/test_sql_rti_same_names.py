"""Red team rtI L1: two unaliased sources of one name in a FROM (`json_each('[1]'), json_each('[2]')`)
made sqlglot's scoping raise "Alias already used" inside `limit_expansion`, answered INTERNAL. The
expansion is now counted over a copy that names them apart, and the query goes on to the database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission.admit import admit
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService

_SAME = [
    "SELECT * FROM json_each('[1]'), json_each('[2]')",
    "SELECT * FROM json_each('[1]'), json_tree('[2]')",
    "SELECT count(*) AS n FROM t, t",
    "SELECT count(*) AS n FROM t JOIN t ON 1",
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    path: Path = tmp_path_factory.mktemp("rti_same") / "t.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER)")
    conn.execute("INSERT INTO t VALUES (1), (2)")
    conn.commit()
    conn.close()
    served = SqlService(SqlEngine(f"sqlite:///{path}", isolate=False), timeout_s=5.0)
    yield served
    served.engine.close()


@pytest.mark.parametrize("sql", _SAME)
def test_two_sources_of_one_name_are_admitted(sql: str) -> None:
    assert admit(sql, "sqlite").sql


@pytest.mark.parametrize("sql", _SAME[1:])
def test_sqlite_answers_two_sources_of_one_name(service: SqlService, sql: str) -> None:
    assert service.query(sql, call_id="rti-l1")[0].rows in (
        [[4]],
        [
            [0, 1, "integer", 1, 1, None, "$[0]", "$", None, "[2]", "array", None, 0, None, "$", "$"],
            [0, 1, "integer", 1, 1, None, "$[0]", "$", 0, 2, "integer", 2, 1, 0, "$[0]", "$"],
        ],
    )


@pytest.mark.parametrize("sql", _SAME[:1])
def test_an_ambiguous_star_is_the_database_s_failure_not_internal(service: SqlService, sql: str) -> None:
    """SQLite itself refuses `*` over two `json_each` (ambiguous column): a query failure, no INTERNAL."""
    with pytest.raises(QueryFailed, match="could not run the query"):
        service.query(sql, call_id="rti-l1")
