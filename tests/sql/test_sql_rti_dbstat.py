"""Red team rtI F1: with masks, `SELECT * FROM dbstat` was refused by name, but the table-valued call
`dbstat('main')` (and a view over `dbstat`, whose name has no catalog prefix) answered each page's
record sizes: a one-row table's masked value's length. The authorizer now denies every read of
`dbstat` whenever masks are set, and the masking analysis refuses it as a withheld relation, called or
named.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masked_service, rows_or_message


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    folder = tmp_path_factory.mktemp("rti_dbstat")
    con = sqlite3.connect(folder / "s.db")
    con.execute("CREATE TABLE secrets (id INTEGER PRIMARY KEY, api_key TEXT)")
    con.execute("INSERT INTO secrets VALUES (1, 'sk-live-TOPSECRET-rtI')")
    con.execute("CREATE TABLE plain (id INTEGER PRIMARY KEY, note TEXT)")
    con.execute("INSERT INTO plain VALUES (1, 'hello')")
    con.execute("CREATE VIEW sizes AS SELECT name, payload FROM dbstat")
    con.commit()
    con.close()
    (folder / "masks.yaml").write_text("masks:\n  - secrets.api_key\n", encoding="utf-8")
    service = masked_service(f"sqlite:///{folder / 's.db'}", folder / "masks.yaml")
    try:
        yield service
    finally:
        service.engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name, payload, mx_payload FROM dbstat('main') WHERE name = 'secrets'",
        "SELECT name, sum(payload) AS p FROM dbstat('main', 1) GROUP BY name",
        "SELECT name, payload FROM sizes WHERE name = 'secrets'",  # a view: the engine's denial
        "SELECT * FROM dbstat",
    ],
    ids=["called", "aggregated", "view", "named"],
)
def test_dbstat_is_refused_with_masks(service: SqlService, sql: str) -> None:
    got = rows_or_message(service, sql)
    assert isinstance(got, str), got


def test_other_tables_still_answer(service: SqlService) -> None:
    assert rows_or_message(service, "SELECT note FROM plain") == [["hello"]]
    assert rows_or_message(service, "SELECT api_key FROM secrets") == [["<masked>"]]


def test_the_engine_denies_dbstat_whatever_the_analysis(service: SqlService) -> None:
    """The call's authorizer alone (`SqliteProfile.begin`), with no masking analysis in front of it."""
    raw = service.engine._sa.raw_connection()
    try:
        dbapi = raw.driver_connection
        service.engine.profile.begin(dbapi, 5.0, "rti-f1")
        try:
            with pytest.raises(sqlite3.DatabaseError, match=r"prohibited|not authorized"):
                dbapi.execute("SELECT payload FROM dbstat('main') WHERE name = 'secrets'").fetchall()
            assert dbapi.execute("SELECT note FROM plain").fetchall() == [("hello",)]
        finally:
            service.engine.profile.end(dbapi)
    finally:
        raw.close()
