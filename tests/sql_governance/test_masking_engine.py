"""Masking the database enforces: whatever SQL reaches it, the calls' identity reads no masked value.

These tests bypass the analysis on purpose (`service.query` sends the SQL as admitted, no plan):
what they show is kept by the engine alone. SQLite: the authorizer reads masked columns as NULL
and refuses the shadow tables of virtual tables over them (FTS5 `_content`, `_data`, `_idx`, ...).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.assemble import enforce_masks
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.masking import MASKED, MaskPolicy, reflect_schema
from mcpkit.sql.service import SqlService
from tests.sql_governance.conftest import CrmDb
from tests.sql_governance.support import leaked, run_masked, secrets

POLICY = MaskPolicy.of(["customers.email", "*.ssn"])

# Copies of masked text in virtual tables: an external-content FTS5 index over customers, a
# standalone FTS5 table whose ssn column the policy masks (its `_content` holds the text), and an
# FTS4 table that copies the emails under a masked name.
_FTS = (
    "CREATE VIRTUAL TABLE customers_fts USING fts5(name, email, content='customers', content_rowid='id')",
    "INSERT INTO customers_fts(customers_fts) VALUES ('rebuild')",
    "CREATE VIRTUAL TABLE ids USING fts5(name, ssn)",
    "INSERT INTO ids SELECT name, ssn FROM customers",
    "CREATE VIRTUAL TABLE legacy USING fts4(name, ssn)",
    "INSERT INTO legacy SELECT name, email FROM customers",
    "CREATE VIRTUAL TABLE products_fts USING fts5(product)",
    "INSERT INTO products_fts SELECT DISTINCT product FROM sales_demo",
)

SHADOW_ROUTES = (
    "SELECT * FROM ids_content",
    "SELECT id FROM ids_content WHERE c1 LIKE '5%'",
    "SELECT * FROM ids_data",
    "SELECT count(*) FROM ids_idx",
    "SELECT * FROM ids_docsize",
    "SELECT * FROM customers_fts_data",
    "SELECT * FROM customers_fts_idx",
    "SELECT * FROM legacy_content",
    "SELECT * FROM legacy_segments",
)

# A virtual table over masked text cannot even open (its constructor reads `_config`): refused.
VTAB_ROUTES = (
    "SELECT rowid FROM customers_fts WHERE customers_fts MATCH 'ada*'",
    "SELECT rowid FROM customers_fts WHERE email MATCH 'ada*'",
    "SELECT rowid FROM ids WHERE ids MATCH 'ssn: 5*'",
    "SELECT highlight(customers_fts, 1, '[', ']') FROM customers_fts('ada*')",
    "SELECT email FROM customers_fts",
    "SELECT name FROM ids",
    "SELECT * FROM legacy",
)

NULLED_ROUTES = (
    "SELECT email, ssn FROM customers",
    "SELECT name, upper(email) FROM customers",
    "SELECT c.id, o.ssn FROM customers c JOIN orders o ON o.customer_id = c.id",
    "SELECT group_concat(email) FROM customers",
    "SELECT max(ssn) FROM customers",
)


@pytest.fixture(scope="module")
def fts_db(sqlite_crm: CrmDb, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fts") / "crm_fts.db"
    path.write_bytes(Path(sqlite_crm.url.removeprefix("sqlite:///")).read_bytes())
    with sqlite3.connect(path) as db:
        for sql in _FTS:
            db.execute(sql)
    db.close()
    return path


@pytest.fixture
def enforced(fts_db: Path) -> Iterator[SqlService]:
    engine = SqlEngine(f"sqlite:///{fts_db}")
    enforce_masks(engine, POLICY.masked_tables(reflect_schema(engine.sa_engine)))
    yield SqlService(engine, max_rows=500, timeout_s=10.0)
    engine.close()


@pytest.fixture
def unenforced(fts_db: Path) -> Iterator[SqlService]:
    engine = SqlEngine(f"sqlite:///{fts_db}")
    yield SqlService(engine, max_rows=500, timeout_s=10.0)
    engine.close()


def _answer(service: SqlService, sql: str) -> list[list[object]] | str:
    try:
        result, _ = service.query(sql, call_id="engine-mask", max_rows=500)
    except Refused:
        return "refused"
    except QueryFailed as exc:
        return f"failed {exc.kind}"
    assert leaked(result, secrets()) == [], sql
    return [list(r) for r in result.rows]


@pytest.mark.parametrize("sql", SHADOW_ROUTES)
def test_sqlite_shadow_tables_and_match_are_denied(enforced: SqlService, sql: str) -> None:
    assert _answer(enforced, sql) == "failed read_only"


@pytest.mark.parametrize("sql", VTAB_ROUTES)
def test_sqlite_virtual_tables_over_masked_text_do_not_open(enforced: SqlService, sql: str) -> None:
    assert str(_answer(enforced, sql)).startswith("failed")


@pytest.mark.parametrize("sql", NULLED_ROUTES)
def test_sqlite_masked_columns_read_as_null(enforced: SqlService, sql: str) -> None:
    rows = _answer(enforced, sql)
    assert isinstance(rows, list) and rows
    assert {c for r in rows for c in r[-1:]} == {None}


def test_sqlite_filters_on_masked_columns_see_only_null(enforced: SqlService) -> None:
    for sql in (
        "SELECT count(*) FROM customers WHERE email LIKE 'a%'",
        "SELECT count(*) FROM customers WHERE ssn IS NOT NULL",
        "SELECT count(*) FROM customers c JOIN customers d ON c.email = d.email",
    ):
        assert _answer(enforced, sql) == [[0]], sql


def test_sqlite_unmasked_tables_and_fts_still_work(enforced: SqlService) -> None:
    assert _answer(enforced, "SELECT count(*) FROM customers WHERE region = 'Europe'") != [[0]]
    rows = _answer(enforced, "SELECT product FROM products_fts WHERE products_fts MATCH 'a*'")
    assert isinstance(rows, list) and rows
    assert _answer(enforced, "SELECT count(*) FROM products_fts_content") != "failed read_only"


def test_sqlite_star_agrees_with_the_plan(enforced: SqlService, fts_db: Path) -> None:
    # The plan masks `*` on the way out; the engine, asked for the masked columns, gives NULL.
    schema = reflect_schema(enforced.engine.sa_engine)  # type: ignore[attr-defined]
    result = run_masked(enforced, "SELECT * FROM customers ORDER BY id", schema, POLICY)
    assert result.columns[:4] == ["id", "name", "email", "ssn"]
    assert {r[2] for r in result.rows} == {MASKED} and {r[3] for r in result.rows} == {MASKED}
    assert all(isinstance(r[1], str) and r[1] for r in result.rows)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM ids_content",
        "SELECT * FROM legacy_content",
        "SELECT email FROM customers_fts",
        "SELECT email, ssn FROM customers",
        "SELECT group_concat(email) FROM customers",
    ],
)
def test_without_the_authorizer_these_routes_leak(unenforced: SqlService, sql: str) -> None:
    # The same routes on the same file with the analysis bypassed and no authorizer: they leak.
    result, _ = unenforced.query(sql, call_id="engine-mask", max_rows=500)
    assert leaked(result, secrets())


def test_without_the_authorizer_filters_see_values(unenforced: SqlService) -> None:
    result, _ = unenforced.query("SELECT count(*) FROM customers WHERE email LIKE 'a%'", call_id="t")
    assert result.rows[0][0] > 0
