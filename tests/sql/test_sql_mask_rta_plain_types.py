"""Red team rtA F4 (side note): a type name that only begins like an integer, boolean, date or year.

`ties.plain_type` (a declared type whose equal values print alike, so no exact tie-breaker is
needed) matched a prefix: a domain `yearly_amount` over numeric, `boolish_score`, `datetime_text`
counted as plain. `CAST(round(1::numeric, scale) AS yearly_amount)` grouped 1.0 and 1.00 together
and printed the first scanned (the e-mail order, one bit per call); now the whole word decides, and
the key is grouped with its exact form, whatever the scan.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit.sql.masking.ties import plain_type
from tests.sql.sql_support import masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

# e-mail order of the ids: 4, 1, 5, 2, 3 (`sql_support.CUSTOMERS_ROWS`); key order 1 .. 5.
PROBE = (
    "SELECT CAST(round(1::numeric, id % 2 + 1) AS {type})::text AS a FROM customers WHERE id IN (1, 4)"
    " GROUP BY CAST(round(1::numeric, id % 2 + 1) AS {type})"
)


def test_only_the_whole_word_is_a_plain_type() -> None:
    for plain in ("INTEGER", "INT(11) UNSIGNED", "BOOLEAN", "DATE", "DATETIME(6)", "TIMESTAMPTZ", "YEAR"):
        assert plain_type(plain), plain
    for other in (
        "yearly_amount",
        "boolish_score",
        "datetime_text",
        "dateish",
        "serialized",
        "NUMERIC(10, 2)",
    ):
        assert not plain_type(other), other


@pytest.mark.postgres
def test_a_numeric_domain_named_like_a_year_is_grouped_by_its_exact_form(pg_url: str, tmp_path: Path) -> None:
    with pg_scratch(pg_url, "fixaplain") as db:
        pg_customers(db)
        db.admin.execute("CREATE DOMAIN yearly_amount AS numeric; CREATE DOMAIN boolish_score AS numeric")
        masks = Path(masks_file(tmp_path, "customers.email"))
        answers = []
        for cluster in ("customers_email", "customers_pkey"):
            db.admin.execute(f"CLUSTER customers USING {cluster}; ANALYZE customers")
            served = serve_masked(db.reader_url, masks)
            try:
                for kind in ("yearly_amount", "boolish_score"):
                    result, _ = served.query(PROBE.format(type=kind), call_id="t")
                    answers.append(sorted(str(r[0]) for r in result.rows))
            finally:
                served.engine.close()
        # before: ['1.0'] clustered on the e-mail (row 4 first), ['1.00'] on the key (row 1 first)
        assert answers == [["1.0", "1.00"]] * 4, answers
