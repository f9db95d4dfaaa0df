"""PostgreSQL: a `pg_catalog.`-qualified call the bounds could not read is refused (found with red
team pg15 F3). sqlglot reads `pg_catalog.repeat(x, n)` as an unknown function whose operands have
no names, so the growth and search bounds found nothing to size and sent it unguarded:
`pg_catalog.repeat(repeat('x', 1000000), 100)` built a 100 MB value that `repeat(...)` refuses.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import service_over

BIG = "(SELECT repeat('x', 1000000) AS big) AS b"


@pytest.fixture
def service(pg_url: str) -> Iterator[SqlService]:
    with service_over(pg_url, 20.0) as service:
        yield service


@pytest.mark.postgres
@pytest.mark.parametrize(
    "call",
    ["pg_catalog.repeat(big, 100)", "pg_catalog.strpos(big || big, big)", "pg_catalog.lpad(big, 90000000)"],
)
def test_postgres_a_qualified_bounded_call_is_refused(call: str, service: SqlService) -> None:
    with pytest.raises(Refused) as info:
        service.query(f"SELECT length({call}::text) AS n FROM {BIG}", call_id="qualified")
    assert info.value.data == {"reason": "function"}
    assert "pg_catalog." in info.value.message


@pytest.mark.postgres
def test_postgres_the_bare_call_is_bounded_and_other_qualified_calls_answer(service: SqlService) -> None:
    with pytest.raises(QueryFailed) as info:
        service.query(f"SELECT length(repeat(big, 100)) AS n FROM {BIG}", call_id="bare")
    assert info.value.kind == "resource"
    result, _ = service.query(
        "SELECT pg_catalog.lower('A') AS l, pg_catalog.length('abc') AS n", call_id="ok"
    )
    assert result.rows == [["a", 3]]
