"""Review R15 (rtA F5 by a collation): a text column under a nondeterministic collation holds equal
values that print differently ('a' = 'A'), so the group a join of two chosen customers to such a
readable table keeps, `GROUP BY p.t`, printed the first customer the scan met (the masked e-mail order).
Such a column counts as printing one way only under a deterministic collation: C, POSIX or the default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import answer_or_refused as _answer
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.postgres

# The ids in e-mail order (`sql_support.CUSTOMERS_ROWS`, clustered on the e-mail): 4, 1, 5, 2, 3.
JOINED = (
    "SELECT {out} AS f FROM customers c JOIN review_names p"
    " ON p.id = (c.id = {a})::int + 2 * (c.id = {b})::int WHERE c.id IN ({a}, {b}){group}"
)


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlService]:
    with pg_scratch(pg_url, "reviewci") as db:
        pg_customers(db)
        db.admin.execute(
            f"""
            CREATE COLLATION review_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
            CREATE TABLE review_names (id int PRIMARY KEY, t text COLLATE review_ci, c text COLLATE "C",
                n numeric);
            INSERT INTO review_names VALUES (1, 'a', 'a', 1.0), (2, 'A', 'b', 1.00);
            GRANT SELECT ON review_names TO {db.reader};
            """
        )
        masks = Path(masks_file(tmp_path_factory.mktemp("ci"), "customers.email"))
        served = serve_masked(db.reader_url, masks)
        try:
            yield served
        finally:
            served.engine.close()


@pytest.mark.parametrize(
    ("out", "group"),
    [("p.t", " GROUP BY p.t"), ("max(p.t)", ""), ("min(p.t)", "")],
)
def test_a_join_to_case_insensitive_equals_does_not_tell_the_scan_order(
    service: SqlService, out: str, group: str
) -> None:
    # 4 is scanned before 1: before, (4, 1) kept 'a' and (1, 4) 'A' (the first customer's row)
    first = _answer(service, JOINED.format(out=out, group=group, a=4, b=1))
    second = _answer(service, JOINED.format(out=out, group=group, a=1, b=4))
    assert first == second or first == "refused" == second, (out, first, second)


def test_a_deterministic_collation_still_groups_as_written(service: SqlService) -> None:
    assert _answer(service, JOINED.format(out="p.c", group=" GROUP BY p.c", a=4, b=1)) == "['a', 'b']"


def test_a_refused_percentile_says_how_to_ask_it(service: SqlService) -> None:
    # review R5: the sentence said "order by the column itself" to a query ordered by a column
    sql = "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY {key}) AS m FROM customers c, review_names p"
    with pytest.raises(Refused) as info:
        service.query(sql.format(key="p.n"), call_id="t")
    assert "numeric(p, s)" in str(info.value)
    assert _answer(service, sql.format(key="CAST(p.n AS numeric(10, 2))")) == "['1']"
