"""Red team rtA F4, F5: the representative of equal values read straight from a table.

F4: a visible `fee numeric` holding 1.00 on one row and 1.0 on the others: `GROUP BY fee`, `max`,
DISTINCT printed the form of the first or last row scanned (the masked e-mail order). F5: the
variants need not be in the masked table: a join of two chosen customers to a readable table
holding 1.0 and 1.00 chose which customer's row a group kept, and a merge sort gave the whole
e-mail ranking in 65 calls. On PostgreSQL a column read from a table now counts as printing one
way only by its declared type (text, varchar, uuid, ...); numeric, float, interval and unknown
types are grouped with their exact form, min/max ordered by it, and DISTINCT aggregates, mode and
percentiles over them refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.service import SqlService
from tests.sql.sql_support import answer_or_refused as _answer
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.postgres

# The ids in e-mail order (`sql_support.CUSTOMERS_ROWS`, clustered on the e-mail): 4, 1, 5, 2, 3.
JOINED = (
    "SELECT {out} AS f FROM customers c JOIN fixa_prices p"
    " ON p.id = (c.id = {a})::int + 2 * (c.id = {b})::int WHERE c.id IN ({a}, {b}){group}"
)


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with pg_scratch(pg_url, "fixarep") as db:
        pg_customers(db)
        db.admin.execute(
            f"""
            CREATE TABLE fixa_prices (id int PRIMARY KEY, p numeric, f float8, iv interval);
            INSERT INTO fixa_prices VALUES (1, 1.0, 0, '1 day'), (2, 1.00, '-0', '24 hours');
            GRANT SELECT ON fixa_prices TO {db.reader};
            ALTER TABLE customers ADD COLUMN fee numeric;
            UPDATE customers SET fee = CASE id WHEN 5 THEN 1.00 ELSE 1.0 END;
            CLUSTER customers USING customers_email;
            GRANT SELECT (fee) ON customers TO {db.reader};
            """
        )
        served = serve_masked(
            db.reader_url, Path(masks_file(tmp_path_factory.mktemp("rep"), "customers.email"))
        )
        try:
            yield served
        finally:
            served.engine.close()


@pytest.mark.parametrize(
    ("out", "group"),
    [
        ("p.p::text", " GROUP BY p.p"),
        ("max(p.p)::text", ""),
        ("min(p.p)::text", ""),
        ("max(p.f)::text", ""),
        ("min(p.iv)::text", ""),
        ("p.iv::text", " GROUP BY p.iv"),
        ("array_to_string(array_agg(DISTINCT p.p), ',')", ""),
        ("(mode() WITHIN GROUP (ORDER BY p.p))::text", ""),
    ],
)
def test_a_join_to_equal_values_does_not_tell_the_scan_order(
    service: SqlService, out: str, group: str
) -> None:
    # F5: 4 is scanned before 1, so (4, 1) and (1, 4) kept the other row's form
    first = _answer(service, JOINED.format(out=out, a=4, b=1, group=group))
    second = _answer(service, JOINED.format(out=out, a=1, b=4, group=group))
    assert first == second, (out, first, second)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT fee::text FROM customers WHERE id IN (5, {x}) GROUP BY fee",
        "SELECT max(fee)::text FROM customers WHERE id IN (5, {x})",
        "SELECT x::text FROM (SELECT DISTINCT fee AS x FROM customers WHERE id IN (5, {x})) d",
        "SELECT (percentile_disc(0.5) WITHIN GROUP (ORDER BY fee))::text FROM customers WHERE id IN (5, {x})",
    ],
)
def test_a_visible_numeric_column_does_not_tell_the_scan_order(service: SqlService, sql: str) -> None:
    # F4: row 5 holds 1.00, rows 1 (scanned before 5) and 2 (after) 1.0
    assert _answer(service, sql.format(x=1)) == _answer(service, sql.format(x=2)), sql


def test_text_and_integer_columns_are_answered_as_before(service: SqlService) -> None:
    assert (
        _answer(service, "SELECT name FROM customers GROUP BY name") == "['Ann', 'Bob', 'Cy', 'Dan', 'Eve']"
    )
    assert _answer(service, "SELECT max(name) FROM customers") == "['Eve']"
    assert _answer(service, "SELECT (mode() WITHIN GROUP (ORDER BY id))::text FROM customers") == "['1']"
