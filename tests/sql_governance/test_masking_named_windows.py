"""Named windows over a masked read: written inline before the analysis, then answered or refused as
the inline form is, on the order twins of `test_masking_order` (whose scan order follows the masked
e-mail): the named query answers both twins alike and with the inline query's rows."""

from __future__ import annotations

import pytest
import sqlglot

from mcpkit.sql.masking import KnownSchema, MaskPolicy
from mcpkit.sql.masking.named_windows import inline_windows
from mcpkit.sql.masking.view_order import order_reason
from mcpkit.sql.service import SqlService
from tests.sql_governance.test_masking_order import (  # noqa: F401  (fixtures)
    OrderTwins,
    _answer,
    mysql_order,
    pg_order,
    sqlite_order,
)

# (named, inline): order-dependent functions over a named window (before: refused, "write it inline")
NAMED = {
    "all": [
        (
            "SELECT id, lag(id) OVER w AS p, lead(name) OVER w AS q FROM customers"
            " WINDOW w AS (PARTITION BY region ORDER BY name)",
            "SELECT id, lag(id) OVER (PARTITION BY region ORDER BY name) AS p,"
            " lead(name) OVER (PARTITION BY region ORDER BY name) AS q FROM customers",
        ),
        (  # a window naming another
            "SELECT id, row_number() OVER w2 AS n FROM customers"
            " WINDOW w AS (PARTITION BY region), w2 AS (w ORDER BY tier)",
            "SELECT id, row_number() OVER (PARTITION BY region ORDER BY tier) AS n FROM customers",
        ),
        (  # OVER (w ROWS ...): w's partition and order, its own frame
            "SELECT id, sum(tier) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM customers"
            " WINDOW w AS (PARTITION BY region ORDER BY name)",
            "SELECT id, sum(tier) OVER (PARTITION BY region ORDER BY name"
            " ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM customers",
        ),
        (  # OVER w: the whole definition, its frame too
            "SELECT id, last_value(id) OVER w AS l FROM customers"
            " WINDOW w AS (ORDER BY name ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
            "SELECT id, last_value(id) OVER (ORDER BY name"
            " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS l FROM customers",
        ),
        (  # a masked output beside it, and a subquery's own window
            "SELECT email, ntile(4) OVER w AS t, (SELECT max(tier) FROM customers) AS m FROM customers"
            " WINDOW w AS (ORDER BY region)",
            "SELECT email, ntile(4) OVER (ORDER BY region) AS t, (SELECT max(tier) FROM customers) AS m"
            " FROM customers",
        ),
    ],
    "postgres": [
        (  # a float sum over a whole partition: ordered as the inline one (red team v4 F1)
            "SELECT id, sum(tier::float8) OVER w AS s FROM customers WINDOW w AS (PARTITION BY name)",
            "SELECT id, sum(tier::float8) OVER (PARTITION BY name) AS s FROM customers",
        ),
    ],
}
# Inlined, still refused by the inline rules (the inline form is refused too).
REFUSED = {
    "all": [
        "SELECT name, rank() OVER w AS r FROM customers WINDOW w AS (ORDER BY ssn)",  # masked key
        "SELECT id, row_number() OVER w2 AS n FROM customers WINDOW w AS (PARTITION BY email),"
        " w2 AS (w ORDER BY id)",
        # a value window over a RANGE frame: its ties are scan order
        "SELECT name, last_value(id) OVER w AS l FROM customers"
        " WINDOW w AS (PARTITION BY region ORDER BY name)",
        "SELECT name, first_value(id) OVER (w RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS f"
        " FROM customers WINDOW w AS (ORDER BY name)",
    ],
    "postgres": [  # a float sum over RANGE peers adds them in scan order
        "SELECT sum(tier::float8) OVER w AS s FROM customers WINDOW w AS (ORDER BY name)",
    ],
    "mysql": [  # ONLY_FULL_GROUP_BY misses a bare column in a window's ORDER BY (rt33b F5)
        "SELECT name, row_number() OVER w AS n FROM customers GROUP BY name WINDOW w AS (ORDER BY id)",
    ],
}


@pytest.fixture(
    params=[
        pytest.param("sqlite_order", id="sqlite"),
        pytest.param("pg_order", id="postgres", marks=pytest.mark.postgres),
        pytest.param("mysql_order", id="mysql", marks=pytest.mark.mysql),
    ]
)
def twins(request: pytest.FixtureRequest) -> OrderTwins:
    found: OrderTwins = request.getfixturevalue(request.param)
    return found


def _inline(sql: str, dialect: str | None = None) -> str:
    return inline_windows(sqlglot.parse_one(sql, read=dialect)).sql(dialect=dialect)


def test_named_windows_answer_the_twins_alike_as_written_inline(twins: OrderTwins) -> None:
    for named, inline in [*NAMED["all"], *NAMED.get(twins.dialect, [])]:
        got = [_answer(s, named) for s in (twins.a, twins.b)]
        assert isinstance(got[0], tuple) and got[0][1], (named, got[0])  # before: refused
        assert got == [got[0], got[0]] == [_answer(twins.a, inline), _answer(twins.b, inline)], named


def test_the_engines_read_a_named_window_as_its_inline_form(twins: OrderTwins) -> None:
    raw = SqlService(twins.a.engine, max_rows=500, timeout_s=20.0)  # no masking: as the engine reads it
    for named, inline in [*NAMED["all"], *NAMED.get(twins.dialect, [])]:
        if "email" in named:
            continue  # withheld from the reader: masking sends it as a typed NULL
        rewritten = _inline(named, twins.dialect)
        answer = _answer(raw, named)
        assert isinstance(answer, tuple) and answer == _answer(raw, inline) == _answer(raw, rewritten), named


def test_an_inlined_window_the_inline_rules_refuse_is_refused(twins: OrderTwins) -> None:
    for sql in [*REFUSED["all"], *REFUSED.get(twins.dialect, [])]:
        assert [_answer(twins.a, sql), _answer(twins.b, sql)] == ["refused", "refused"], sql
        assert _answer(twins.a, _inline(sql, twins.dialect)) == "refused", sql


@pytest.mark.parametrize(
    ("sql", "inline"),
    [
        (
            "SELECT rank() OVER w, sum(x) OVER (w) FROM t WINDOW w AS (ORDER BY b ROWS 1 PRECEDING)",
            "SELECT RANK() OVER (ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW),"
            " SUM(x) OVER (ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
        ),
        (
            "SELECT count(*) OVER (W ORDER BY b) FROM t WINDOW w AS (PARTITION BY a), v AS (w)",
            "SELECT COUNT(*) OVER (PARTITION BY a ORDER BY b) FROM t",
        ),
        (  # each block its own WINDOW clause
            "SELECT rank() OVER w, (SELECT max(y) OVER w FROM u WINDOW w AS (ORDER BY y) LIMIT 1) FROM t"
            " WINDOW w AS (PARTITION BY a)",
            "SELECT RANK() OVER (PARTITION BY a), (SELECT MAX(y) OVER (ORDER BY y) FROM u LIMIT 1) FROM t",
        ),
        # what the engines refuse is left as written: a new PARTITION BY, a second ORDER BY, a
        # frame under a new one, an unknown, later or repeated name
        ("SELECT rank() OVER (w PARTITION BY c) FROM t WINDOW w AS (ORDER BY b)", None),
        ("SELECT rank() OVER (w ORDER BY c) FROM t WINDOW w AS (ORDER BY b)", None),
        ("SELECT rank() OVER (w ORDER BY c) FROM t WINDOW w AS (ROWS 1 PRECEDING)", None),
        ("SELECT rank() OVER v FROM t WINDOW w AS (ORDER BY b)", None),
        ("SELECT rank() OVER w FROM t WINDOW w AS (v ORDER BY b), v AS (PARTITION BY a)", None),
        ("SELECT rank() OVER w FROM t WINDOW w AS (ORDER BY b), W AS (ORDER BY c)", None),
    ],
)
def test_named_windows_are_written_inline_as_the_engines_read_them(sql: str, inline: str | None) -> None:
    assert _inline(sql) == (inline or sqlglot.parse_one(sql).sql())


STORED = {"customers": {"id": "INT", "email": "TEXT", "city": "TEXT"}}


def _stored(sql: str, dialect: str) -> str | None:
    known = KnownSchema(STORED, dialect)
    policy = MaskPolicy.of(["customers.email"])
    return order_reason(sql, dialect, known, policy, lambda schema, table: [frozenset({"id"})])


@pytest.mark.parametrize("dialect", ["mysql", "postgres", "sqlite"])
def test_a_stored_view_over_a_named_window_is_checked_as_written_inline(dialect: str) -> None:
    # before: "over a named window" whatever its order
    sql = "SELECT id, row_number() OVER w AS n FROM customers WINDOW w AS (ORDER BY id)"
    assert _stored(sql, dialect) is None
    found = _stored(sql.replace("ORDER BY id", "ORDER BY city"), dialect)
    assert found is not None and "without an order on a whole primary key" in found, found
    found = _stored("SELECT id, rank() OVER w AS r FROM customers WINDOW w AS (ORDER BY email)", dialect)
    assert found is not None and "email" in found, found
    if dialect != "postgres":  # a bare column in a named window of a grouped block (rt33b F5)
        sql = "SELECT city, RANK() OVER w AS r FROM customers GROUP BY city WINDOW w AS (ORDER BY id)"
        found = _stored(sql, dialect)
        assert found is not None and "bare column" in found, found
