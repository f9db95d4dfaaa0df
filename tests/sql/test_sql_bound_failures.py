"""The error a bounded call's guard raises on purpose, as PostgreSQL and MariaDB raise it, mapped to
the `resource` kind and the agent's sentence by the base profile (the engines only find the marker)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from mcpkit.sql.admission.function_tables import SEARCH_BOUND_MARKER, SIZE_BOUND_MARKER, SearchBounds
from mcpkit.sql.admission.function_tables.mysql_bounds import SIZE_BOUNDS as MYSQL_BOUNDS
from mcpkit.sql.admission.function_tables.postgres_bounds import SIZE_BOUNDS as PG_BOUNDS
from mcpkit.sql.dialects import sent_dialect
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SEARCH_TOO_LARGE, VALUE_TOO_LARGE

SENTENCES = {SEARCH_BOUND_MARKER: SEARCH_TOO_LARGE, SIZE_BOUND_MARKER: VALUE_TOO_LARGE}


def _raised(engine: SqlEngine, sql: str) -> BaseException:
    raw = engine.sa_engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute(sql)
        cur.fetchall()
    except Exception as exc:  # the driver's own error is what the profile maps
        return exc
    finally:
        raw.rollback()
        raw.close()
    raise AssertionError(f"no error from {sql}")


def _guard(bounds: SearchBounds, dialect: str, marker: str) -> str:
    cond = sqlglot.parse_one("1 = 1", read=dialect)
    fail = bounds.fail(cond, marker)
    return exp.select(exp.Case(ifs=[exp.If(this=fail, true=exp.Literal.number(1))])).sql(
        dialect=sent_dialect(dialect)
    )


@pytest.mark.parametrize(
    ("dialect", "plain", "kind"),
    [
        pytest.param("postgres", "SELECT 'x'::int", "data", marks=pytest.mark.postgres),
        pytest.param("mysql", "SELECT 18446744073709551615 + 1", "other", marks=pytest.mark.mysql),
    ],
)
@pytest.mark.parametrize("marker", sorted(SENTENCES))
def test_a_guard_failure_is_resource_with_its_sentence(
    dialect: str, plain: str, kind: str, marker: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_url" if dialect == "postgres" else "mysql_url")
    engine = SqlEngine(url)
    try:
        bounds = PG_BOUNDS if dialect == "postgres" else MYSQL_BOUNDS
        exc = _raised(engine, _guard(bounds, dialect, marker))
        assert engine.profile.bound_marker(exc, marker), exc
        assert engine.profile.classify(exc) == "resource"
        assert engine.profile.failure_message(exc) == SENTENCES[marker]
        # The same error from the query's own SQL (no marker): not ours, the kind's own sentence.
        other = _raised(engine, plain)
        assert engine.profile.failure_message(other) is None
        assert engine.profile.classify(other) == kind, other
    finally:
        engine.close()
