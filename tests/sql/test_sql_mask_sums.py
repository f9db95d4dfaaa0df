"""Sums that add in scan order over a masked read (red team rt33c F3).

`sum(CASE id WHEN 2 THEN interval '2000000000 months' WHEN 4 THEN ... WHEN 5 THEN interval
'-2000000000 months' ELSE interval '0' END) FROM customers` failed ("interval out of range") when the
scan brought 2 and 4 before 5 and answered otherwise: with the table clustered on the masked e-mail,
one comparison of the e-mail ranking per call. Floating-point and money sums (and avg, stddev, corr,
regr) overflow, or round, the same way. Over a masked read PostgreSQL is now sent such an aggregate
ordered by its arguments (`masking.sums`), so it adds the same values in the same order whatever
the scan; integer and numeric sums are exact and are left alone. A window over its whole partition
is ordered by the sum's argument (red team v4 F1: `sum(x) OVER ()` added in the e-mail order).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.errors import ToolError
from mcpkit.sql.masking import MaskPolicy, plan_masking
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

# The ids in e-mail order (`sql_support.CUSTOMERS_ROWS`): 4, 1, 5, 2, 3.
BIG = {
    "interval": ("interval '2000000000 months'", "interval '-2000000000 months'", "interval '0'"),
    "float8": ("1e308::float8", "-1e308::float8", "0::float8"),
    "money": ("'90000000000000000'::money", "'-90000000000000000'::money", "'0'::money"),
}


def _probe(kind: str, first: int, second: int) -> str:
    """Overflows when `first` and `second` both come before 5 in the order the sum adds in."""
    up, down, zero = BIG[kind]
    return (
        f"SELECT sum(CASE id WHEN {first} THEN {up} WHEN {second} THEN {up} WHEN 5 THEN {down}"
        f" ELSE {zero} END)::text AS s FROM customers"
    )


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with pg_scratch(pg_url, "masksums") as db:
        pg_customers(db)
        masks = Path(masks_file(tmp_path_factory.mktemp("sums"), "customers.email"))
        served = serve_masked(db.reader_url, masks)
        try:
            yield served
        finally:
            served.engine.close()


def _answer(service: SqlService, sql: str) -> str:
    try:
        result, _ = service.query(sql, call_id="t")
        return str(result.rows)
    except ToolError as exc:
        return exc.code


@pytest.mark.postgres
@pytest.mark.parametrize("kind", sorted(BIG))
def test_postgres_an_overflowing_sum_answers_alike_whatever_the_scan_order(
    service: SqlService, kind: str
) -> None:
    # 4 and 1 come before 5 in the scan, 4 and 2 do not: the old answer-or-error bit.
    before, around = _answer(service, _probe(kind, 4, 1)), _answer(service, _probe(kind, 4, 2))
    assert before == around, (kind, before, around)
    assert "@" not in before


@pytest.mark.postgres
def test_postgres_a_float_sum_rounds_alike_whatever_the_scan_order(service: SqlService) -> None:
    probes = [
        f"SELECT sum(CASE id WHEN {a} THEN 1e16::float8 WHEN {b} THEN 1::float8 WHEN 5 THEN -1e16::float8"
        " ELSE 0 END)::text AS s FROM customers"
        for a, b in [(4, 1), (4, 2)]
    ]
    assert _answer(service, probes[0]) == _answer(service, probes[1])


SCHEMA = {
    "customers": {
        "id": "INTEGER",
        "email": "TEXT",
        "amount": "NUMERIC(10, 2)",
        "score": "DOUBLE PRECISION",
        "span": "INTERVAL",
    }
}


def _sent(sql: str) -> str:
    plan = plan_masking(sql, "postgres", SCHEMA, MaskPolicy.of(["customers.email"]))
    assert plan.sql is not None
    return plan.sql


def test_floating_interval_and_money_aggregates_are_ordered_exact_ones_are_not() -> None:
    sent = _sent(
        "SELECT sum(score), avg(span), stddev(score), corr(score, id),"
        " sum(amount::float8) FILTER (WHERE id > 1) FROM customers"
    )
    assert "SUM(score ORDER BY score, pg_catalog.format('%L', score) COLLATE pg_catalog.\"C\")" in sent, sent
    assert "AVG(span ORDER BY span, pg_catalog.format('%L', span) COLLATE pg_catalog.\"C\")" in sent, sent
    assert "STDDEV(score ORDER BY score" in sent and "CORR(score, id ORDER BY score" in sent, sent
    assert "SUM(CAST(amount AS DOUBLE PRECISION) ORDER BY CAST(amount AS DOUBLE PRECISION)" in sent, sent
    # written orders are completed
    sent = _sent("SELECT sum(score ORDER BY id) FROM customers")
    exact = "pg_catalog.format('%L', score) COLLATE pg_catalog.\"C\""
    assert f"SUM(score ORDER BY id, score, {exact})" in sent, sent
    # DISTINCT over a float keeps whichever of -0 and 0 it meets first (red team rtA F4): refused
    with pytest.raises(ToolError, match="DISTINCT values"):
        _sent("SELECT avg(DISTINCT score) FROM customers")
    # integers and numerics add up exactly in any order (and sorting costs)
    for exact in [
        "SELECT sum(id), avg(id * 2 + 1), sum(amount), sum(id::numeric / 3), sum(CASE WHEN id > 1 THEN 2 END)"
        " FROM customers",
    ]:
        assert "SUM(score ORDER BY" not in _sent(exact) and "SUM(id ORDER BY" not in _sent(exact)
        assert "AVG(id * 2 + 1 ORDER BY" not in _sent(exact)


@pytest.mark.parametrize(
    ("key", "answered"),
    [
        ("amount / id", True),  # red team v1 L2: numeric of varying scale, one float8 value each
        ("CASE WHEN id > 2 THEN amount * 1.5 ELSE id % 3 END", True),
        ("score * 2", False),  # a float: -0 and 0 are equal, and print differently
        ("amount::float8 / 3", False),
        ("round(amount, 1)", False),  # a call: its type is not traced
    ],
)
def test_percentile_cont_over_an_exact_expression_is_answered(key: str, answered: bool) -> None:
    sql = f"SELECT percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY {key}) AS p FROM customers"
    disc = sql.replace("percentile_cont", "percentile_disc")  # keeps a value: its scale shows
    for query, expected in ((sql, answered), (disc, False)):
        try:
            plan_masking(query, "postgres", SCHEMA, MaskPolicy.of(["customers.email"]))
        except ToolError:
            assert not expected, query
        else:
            assert expected, query


@pytest.mark.postgres
def test_postgres_a_float_window_sum_adds_alike_whatever_the_scan_order(service: SqlService) -> None:
    """Red team v4 F1: 1 + 1e16 - 1e16 is 1 only when the 1 comes last: which of 4, 1, 5 the scan
    (the e-mail order) brought last, one comparison per call."""
    for func in ("sum", "avg"):
        for window in (
            "OVER ()",
            "OVER (PARTITION BY id > 0)",
            "FILTER (WHERE id > 0) OVER ()",
            "OVER (RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
        ):
            answers = {
                _answer(
                    service,
                    f"SELECT {func}(CASE id WHEN {r} THEN 1 WHEN 1 THEN 1e16 ELSE -1e16 END::float8) {window}"
                    " AS s FROM customers WHERE id + 0 IN (4, 1, 5) LIMIT 1",
                )
                for r in (5, 4)  # before: 1.0 with the 1 on 5 (scanned last), 0.0 on 4
            }
            assert len(answers) == 1 and "[[" in answers.pop(), (func, window)
    for sql in (
        "SELECT sum(id::float8) OVER (ORDER BY name) AS s FROM customers",  # peers add in scan order
        "SELECT sum(id::float8) OVER w AS s FROM customers WINDOW w AS (ORDER BY name)",  # inlined: peers
    ):
        assert _answer(service, sql) == "REFUSED", sql
    # a named window is written inline first, then ordered as the inline one (before: refused)
    named = "SELECT sum(id::float8) OVER w AS s FROM customers WINDOW w AS (PARTITION BY name)"
    inline = "SELECT sum(id::float8) OVER (PARTITION BY name) AS s FROM customers"
    assert _answer(service, named) == _answer(service, inline) != "REFUSED"
    sql = "SELECT sum(id::float8) OVER (ORDER BY name ROWS UNBOUNDED PRECEDING) AS s FROM customers LIMIT 1"
    assert _answer(service, sql) == "[[1.0]]"  # Ann: completed with the visible columns
    sql = "SELECT count(*) FILTER (WHERE id > 2) OVER () AS n FROM customers LIMIT 1"
    assert _answer(service, sql) == "[[3]]"  # before: ordered by the visible columns, a running count (0)
    sent = _sent("SELECT avg(score) OVER (PARTITION BY id) FROM customers")
    assert "PARTITION BY id ORDER BY score" in sent and "ROWS BETWEEN UNBOUNDED PRECEDING AND" in sent, sent
