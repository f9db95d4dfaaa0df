"""Review R2 (after rtB F1): on MariaDB an IN / ANY / ALL subquery over a masked read is sent as written
only when none of its comparisons converts a value per row (a conversion warning fails the call on the
rows a first match lets the scan reach). A string literal that converts cleanly to the column's kind,
a date (`day >= '2024-01-01'`) or a plain number (`customer_id = '2'`), never warns (measured on 10.11,
also guarded by CASE where MariaDB converts it lazily), so such a subquery is answered as it was before
rtB F1; one that does not convert cleanly (`day >= 'soon'`, `'2024-02-30'`, `'2e0'`) and a text column
against a number (`status = 5`) stay refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masks_file, mysql_customers, mysql_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.mysql

SUBQUERY = "SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE {where}) ORDER BY id"


@pytest.fixture(scope="module")
def service(mysql_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with mysql_scratch(mysql_url, "review") as db:
        mysql_customers(db)
        with db.admin.cursor() as c:
            c.execute(
                f"CREATE TABLE {db.db}.orders (id int PRIMARY KEY, customer_id int, day date, at datetime,"
                " status varchar(10), amount double)"
            )
            c.execute(
                f"INSERT INTO {db.db}.orders VALUES"
                " (1, 1, '2024-01-05', '2024-01-05 10:00:00', 'paid', 10.5),"
                " (2, 2, '2023-06-01', '2023-06-01 09:00:00', 'open', 20),"
                " (3, 3, '2024-03-05', NULL, 'paid', 30)"
            )
            c.execute(f"GRANT SELECT ON {db.db}.orders TO '{db.reader}'@'%'")
        masks = Path(masks_file(tmp_path_factory.mktemp("lit"), "customers.email"))
        served = serve_masked(db.reader_url, masks)
        try:
            yield served
        finally:
            served.engine.close()


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ("day >= '2024-01-01'", [1, 3]),
        ("day BETWEEN '2024-01-01' AND '2024-12-31' AND status = 'paid'", [1, 3]),
        ("at < '2024-01-01 00:00:00'", [2]),
        ("customer_id >= '2'", [2, 3]),
        ("customer_id IN ('1', '2.0')", [1, 2]),
    ],
)
def test_a_literal_that_converts_cleanly_is_answered(service: SqlService, where: str, ids: list[int]) -> None:
    result, _ = service.query(SUBQUERY.format(where=where), call_id="t")
    assert [r[0] for r in result.rows] == ids


@pytest.mark.parametrize(
    "where",
    ["day >= 'soon'", "day = '2024-02-30'", "customer_id = '2e0'", "customer_id = 'x'", "status = 5"],
)
def test_a_literal_that_may_warn_per_row_is_refused(service: SqlService, where: str) -> None:
    with pytest.raises(Refused) as info:
        service.query(SUBQUERY.format(where=where), call_id="t")
    assert "comparison across types" in str(info.value)


def test_a_refused_max_of_a_double_says_how_to_ask_it(service: SqlService) -> None:
    # review R11: the sentence spoke of "a computed text value" and CAST(... AS BINARY)
    sql = "SELECT MAX({value}) AS m FROM orders o JOIN customers c ON c.id = o.customer_id"
    with pytest.raises(Refused) as info:
        service.query(sql.format(value="o.amount * 2"), call_id="t")
    assert "CAST(... AS DECIMAL(30, 10)) for a number" in str(info.value)
    result, _ = service.query(sql.format(value="CAST(o.amount * 2 AS DECIMAL(30, 10))"), call_id="t")
    assert [str(r[0]) for r in result.rows] == ["60"]
