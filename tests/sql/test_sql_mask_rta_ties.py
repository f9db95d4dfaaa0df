"""Red team rtA L1: `FETCH FIRST n ROWS WITH TIES` over a masked read lost its ties.

`SELECT id, region FROM customers ORDER BY region FETCH FIRST 1 ROWS WITH TIES` answered one row, not
every row of the first region: the completion's tie-breakers were added inside the block, so no row
tied any more (a silently different answer). Such a query is now refused with the rank() form,
which answers; FETCH ... ONLY is completed as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with pg_scratch(pg_url, "fixaties") as db:
        pg_customers(db)
        served = serve_masked(
            db.reader_url, Path(masks_file(tmp_path_factory.mktemp("ties"), "customers.email"))
        )
        try:
            yield served
        finally:
            served.engine.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id FROM customers ORDER BY id > 2 FETCH FIRST 1 ROWS WITH TIES",
        "SELECT * FROM (SELECT id, name FROM customers ORDER BY id > 2 FETCH FIRST 1 ROW WITH TIES) AS t",
    ],
)
def test_with_ties_keeps_every_tied_row_or_is_refused(service: SqlService, sql: str) -> None:
    try:
        result, _ = service.query(sql, call_id="t")
    except Refused as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        assert "rank()" in refused
        return
    assert sorted(r[0] for r in result.rows) == [1, 2]  # before: [1], a tie-breaker dropped 2


def test_the_rank_form_and_fetch_only_answer(service: SqlService) -> None:
    result, _ = service.query(
        "SELECT id FROM (SELECT id, rank() OVER (ORDER BY id > 2) AS r FROM customers) AS t WHERE r <= 1",
        call_id="t",
    )
    assert [r[0] for r in result.rows] == [1, 2]
    result, _ = service.query("SELECT id FROM customers ORDER BY id > 2 FETCH FIRST 1 ROWS ONLY", call_id="t")
    assert [r[0] for r in result.rows] == [1]
