"""Red team rtd F2: the plan-only recheck of a failure told its class by the time the call took.

Over a masked read a failure of another class than data is planned again (`EXPLAIN`, masking's
`failures.row_failure`) and, when the plan passes, told as the data failure: the sentence and code
are one, but only those failures paid the recheck's round trip and planning, 50-100 ms. With
`CASE WHEN id = a THEN 1 / (id - id) = 1 WHEN id = b THEN cast(name AS regclass) IS NULL END` the
faster call had its division on the row scanned first: rtd ranked the masked e-mails of a table
loaded in e-mail order, 6 comparisons of 6. Now a data failure is rechecked all the same.

The test counts the statements each failed call ran to the end (the plan-only recheck is one)
rather than timing them; `fixd_slow` (an IMMUTABLE function of a constant, evaluated while the
query is planned) keeps each planning as costly as the red team's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.admission.policy import FunctionPolicy
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.postgres

SLOW = 0.3  # seconds each planning takes
PROBE = (
    "SELECT count(*) FROM customers WHERE CASE WHEN id = {a} THEN 1 / (id - id) = 1"
    " WHEN id = {b} THEN cast(name AS regclass) IS NULL ELSE id > public.fixd_slow(0) END"
)


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with pg_scratch(pg_url, "fixdfail") as db:
        pg_customers(db)  # clustered on the masked e-mail: ids in e-mail order 4, 1, 5, 2, 3
        db.admin.execute(
            "CREATE FUNCTION fixd_slow(int) RETURNS int LANGUAGE plpgsql IMMUTABLE"
            f" AS $$ BEGIN PERFORM pg_sleep({SLOW}); RETURN $1; END $$"
        )
        masks = Path(masks_file(tmp_path_factory.mktemp("rtdf"), "customers.email"))
        served = serve_masked(
            db.reader_url, masks, functions=FunctionPolicy.for_dialect("postgres", extra=["public.fixd_slow"])
        )
        try:
            yield served
        finally:
            served.engine.close()


def _failed(service: SqlService, a: int, b: int, caplog: pytest.LogCaptureFixture) -> tuple[str, int]:
    """The failure's class and how many statements the call ran to the end: the failed query runs
    none, each plan-only recheck one (the engine's "row(s) in" line). Counted, not timed: on a loaded
    host the time of one call varies by more than a planning (review R8)."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="mcpkit.sql"), pytest.raises(QueryFailed) as caught:
        service.query(PROBE.format(a=a, b=b), call_id="t")
    ran = sum("sql call t:" in r.getMessage() and "row(s) in" in r.getMessage() for r in caplog.records)
    return caught.value.kind, ran


def test_which_row_fails_first_does_not_show_in_the_time_taken(
    service: SqlService, caplog: pytest.LogCaptureFixture
) -> None:
    # 4 is scanned before 1: (4, 1) fails on the division (data), (1, 4) on the cast (folded); each
    # planned again once, the same work whichever row failed (before: the data failure never was)
    assert _failed(service, 4, 1, caplog) == _failed(service, 1, 4, caplog) == ("data", 1)
