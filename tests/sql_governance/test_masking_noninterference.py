"""Non-interference: what masking lets through must not depend on the masked values at all.

Two SQLite databases differ only in the masked columns (other emails and SSNs, other lengths,
duplicates). Hypothesis writes queries that put masked and clean columns in every clause; each
query the plan admits must give the same visible answer on both databases. A filter, an order,
a group or a count that depended on a masked value would show as a difference.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings

from mcpkit.errors import Refused
from mcpkit.sql.assemble import enforce_masks
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.masking import MaskPolicy, reflect_schema
from mcpkit.sql.models import QueryResult
from mcpkit.sql.service import SqlService
from tests.sql_governance.conftest import CrmDb
from tests.sql_governance.support import load_corpus, masked_queries, run_masked
from tests.sql_governance.test_masking_engine import (
    FTS_TABLES,
    NULLED_ROUTES,
    SHADOW_ROUTES,
    VTAB_ROUTES,
)

POLICY = MaskPolicy.of(["customers.email", "*.ssn"])


def _scramble(path: Path) -> None:
    rng = random.Random(66)  # deterministic
    with sqlite3.connect(path) as db:
        ids = [r[0] for r in db.execute("SELECT id FROM customers")]
        for i in ids:
            email = rng.choice(["z@q.io", "zz-top@example.net", f"{rng.randint(0, 9)}@x.y"])
            ssn = rng.choice(["000-00-0000", "999-99-9999", f"{rng.randint(100, 999)}"])
            db.execute("UPDATE customers SET email = ?, ssn = ? WHERE id = ?", (email, ssn, i))
    db.close()


@pytest.fixture(scope="module")
def twins(
    sqlite_crm: CrmDb, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SqlService, SqlService]]:
    source = Path(sqlite_crm.url.removeprefix("sqlite:///"))
    other = tmp_path_factory.mktemp("twin") / "demo.db"
    other.write_bytes(source.read_bytes())
    _scramble(other)
    a, b = SqlEngine(sqlite_crm.url), SqlEngine(f"sqlite:///{other}")
    yield SqlService(a, max_rows=500, timeout_s=10.0), SqlService(b, max_rows=500, timeout_s=10.0)
    a.close()
    b.close()


def _answer(service: SqlService, sql: str, schema: dict[str, dict[str, str]]) -> QueryResult | str:
    try:
        return run_masked(service, sql, schema, POLICY)
    except Refused:
        return "refused"
    except QueryFailed as exc:
        return f"failed {exc.kind}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=masked_queries())
def test_answers_do_not_depend_on_masked_values(twins: tuple[SqlService, SqlService], sql: str) -> None:
    a, b = twins
    schema = reflect_schema(a.engine.sa_engine)  # type: ignore[attr-defined]
    first, second = _answer(a, sql, schema), _answer(b, sql, schema)
    event(first if isinstance(first, str) else "answered")
    if isinstance(first, str) or isinstance(second, str):
        assert first == second, sql
        return
    assert first.columns == second.columns, sql
    assert first.rows == second.rows, sql


def test_the_twins_really_differ(twins: tuple[SqlService, SqlService]) -> None:
    a, b = twins
    sql = "SELECT count(*) FROM customers WHERE email LIKE 'a%'"
    assert a.query(sql, call_id="t")[0].rows != b.query(sql, call_id="t")[0].rows


@pytest.fixture(scope="module")
def enforced_twins(
    sqlite_crm: CrmDb, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SqlService, SqlService]]:
    """The twins with FTS5/FTS4 copies of the masked text, each opened with the masks enforced."""
    source = Path(sqlite_crm.url.removeprefix("sqlite:///"))
    services = []
    for scramble in (False, True):
        path = tmp_path_factory.mktemp("etwin") / "demo.db"
        path.write_bytes(source.read_bytes())
        if scramble:
            _scramble(path)
        with sqlite3.connect(path) as db:
            for sql in FTS_TABLES:
                db.execute(sql)
        db.close()
        engine = SqlEngine(f"sqlite:///{path}")
        enforce_masks(engine, POLICY.masked_tables(reflect_schema(engine.sa_engine)))
        services.append(SqlService(engine, max_rows=500, timeout_s=10.0))
    yield services[0], services[1]
    for s in services:
        s.engine.close()  # type: ignore[attr-defined]


def _raw(service: SqlService, sql: str) -> object:
    try:
        result, _ = service.query(sql, call_id="twin", max_rows=500)
    except Refused:
        return "refused"
    except QueryFailed as exc:
        return f"failed {exc.kind}"
    return (result.columns, result.rows)


def test_the_engine_alone_answers_the_twins_alike(enforced_twins: tuple[SqlService, SqlService]) -> None:
    # Every SQLite attack of the corpus and every shadow-table route, sent with the analysis
    # bypassed (admission only): the authorizer alone must make the twins indistinguishable.
    _, attacks, _ = load_corpus()
    routes = [c.text("main") for c in attacks if "sqlite" in c.dialects]
    routes += [*SHADOW_ROUTES, *VTAB_ROUTES, *NULLED_ROUTES]
    assert len(routes) > 90
    a, b = enforced_twins
    answers = [(sql, _raw(a, sql), _raw(b, sql)) for sql in routes]
    differing = [sql for sql, x, y in answers if x != y]
    # SQLite (3.40) does not report the columns of a USING / NATURAL join condition to the
    # authorizer: there the analysis is the only guard, and it refuses every such join.
    gaps = [sql for sql in differing if "NATURAL JOIN" in sql.upper() or "USING (" in sql.upper()]
    assert differing == gaps
    schema = reflect_schema(a.engine.sa_engine)  # type: ignore[attr-defined]
    for sql in gaps:
        with pytest.raises(Refused):
            run_masked(a, sql, schema, POLICY)
    assert sum(isinstance(x, tuple) for _, x, _ in answers) > 30  # most routes answer (with NULLs)


def test_without_the_authorizer_the_twins_differ(twins: tuple[SqlService, SqlService]) -> None:
    a, b = twins
    differing = [sql for sql in NULLED_ROUTES if _raw(a, sql) != _raw(b, sql)]
    assert differing
