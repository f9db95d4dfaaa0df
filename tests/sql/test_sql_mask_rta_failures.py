"""Red team rtA F1: the class of a failure a row raises told which row the scan met first.

`CASE WHEN id = a THEN 1 / (id - id) = 1 WHEN id = b THEN cast(name AS regclass) IS NULL END`
failed as `data` when row a was scanned first and as `undefined_object` when row b was; with the
table clustered on the masked e-mail a merge sort over it gave the whole e-mail ranking. Over a
masked read a failure a row raises now reads as the data failure, whatever its class; a failure
the planner raises (a constant that is no relation) keeps its class.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.postgres

# The ids in e-mail order (`sql_support.CUSTOMERS_ROWS`, clustered on the e-mail): 4, 1, 5, 2, 3.
OTHER_CLASS = {
    "regclass": "cast(name AS regclass) IS NULL",  # 42P01, undefined_object
    "regtype": "cast(name AS regtype) IS NULL",  # 42704, undefined_object
    "regnamespace": "cast(name AS regnamespace) IS NULL",  # 3F000, other
    "jsonpath": "cast(name || ' $' AS jsonpath) IS NULL",  # 42601, syntax
    "tsquery": "to_tsquery(name || ' & ') IS NULL",  # 42601, syntax
    "regproc": "cast(name AS regproc) IS NULL",  # 42883, undefined_object
    "feature": "date_part('week', CASE WHEN id > 0 THEN interval '1 day' END) IS NULL",  # 0A000
    "regrole": "cast(name AS regrole) IS NULL",  # 42704
}


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with pg_scratch(pg_url, "fixarta") as db:
        pg_customers(db)
        masks = Path(masks_file(tmp_path_factory.mktemp("rta"), "customers.email"))
        served = serve_masked(db.reader_url, masks)
        try:
            yield served
        finally:
            served.engine.close()


def _failure(service: SqlService, sql: str) -> tuple[str, str]:
    with pytest.raises(QueryFailed) as caught:
        service.query(sql, call_id="t")
    return caught.value.kind, str(caught.value)


@pytest.mark.parametrize("other", sorted(OTHER_CLASS))
def test_which_row_fails_first_does_not_show_in_the_failure_class(service: SqlService, other: str) -> None:
    probe = (
        "SELECT count(*) FROM customers WHERE CASE WHEN id = {a} THEN 1 / (id - id) = 1"
        f" WHEN id = {{b}} THEN {OTHER_CLASS[other]} ELSE false END"
    )
    # 4 is scanned before 1: the data failure came first, then the other class.
    first, second = _failure(service, probe.format(a=4, b=1)), _failure(service, probe.format(a=1, b=4))
    assert first == second, (other, first, second)
    assert first[0] == "data"


def test_a_row_failure_reads_as_data_also_in_the_select_list(service: SqlService) -> None:
    kinds = {
        _failure(
            service,
            f"SELECT id, CASE WHEN id = {a} THEN (1 / (id - id))::text ELSE cast(name AS regclass)::text"
            " END FROM customers",
        )[0]
        for a in (4, 3)
    }
    assert kinds == {"data"}


def test_a_failure_the_planner_raises_keeps_its_class(service: SqlService) -> None:
    # a constant folded while planning: the same on every row, and worth its own sentence
    assert _failure(service, "SELECT id, 'mcpkit_no_such'::regclass FROM customers")[0] == "undefined_object"


def test_without_a_masked_read_the_class_is_told(service: SqlService) -> None:
    assert _failure(service, "SELECT cast(x AS regclass) FROM (VALUES ('mcpkit_nope')) AS v(x)")[0] == (
        "undefined_object"
    )
