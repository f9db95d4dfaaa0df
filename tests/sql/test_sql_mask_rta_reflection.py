"""Red team rtA F3: SQLAlchemy's reflection answered by a user operator on the reader's path.

SQLAlchemy reflects a table's columns with `pg_attribute.attnum > 0::SMALLINT`, an unqualified
operator. `CREATE OPERATOR public.> (smallint, smallint)` over `pg_catalog.int2lt`, with the reader's
search_path `public, pg_catalog`, reflected `customers` as its system columns: `*.email` masked
nothing, the e-mail order was served (`string_agg` in scan order) and, granted the whole table,
the e-mails themselves. Masking's reflection now reads with pg_catalog alone on the path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.masking.schema import reflect_schema
from tests.sql.sql_support import PgScratch, masks_file, pg_customers, pg_scratch
from tests.sql_governance.support import serve_masked

pytestmark = pytest.mark.postgres

CAPTURE = "CREATE OPERATOR public.> (leftarg = smallint, rightarg = smallint, function = pg_catalog.int2lt)"


@pytest.fixture(scope="module")
def captured(pg_url: str) -> Iterator[PgScratch]:
    with pg_scratch(pg_url, "fixartf3") as db:
        pg_customers(db)
        db.admin.execute(CAPTURE)
        db.admin.execute(f"ALTER ROLE {db.reader} IN DATABASE {db.db} SET search_path = public, pg_catalog")
        yield db


def test_reflection_sees_the_columns_a_user_operator_would_hide(captured: PgScratch) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(captured.reader_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        assert set(reflect_schema(engine, "public")["customers"]) == {"id", "name", "email"}
        assert set(reflect_schema(engine)["customers"]) == {"id", "name", "email"}
    finally:
        engine.dispose()


def test_a_glob_mask_masks_and_orders_under_the_operator(captured: PgScratch, tmp_path: Path) -> None:
    served = serve_masked(captured.reader_url, Path(masks_file(tmp_path, "'*.email'")))
    try:
        result, _ = served.query("SELECT string_agg(id::text, ',') AS ids FROM customers", call_id="t")
        assert result.rows[0][0] == "1,2,3,4,5"  # not the scan's (the e-mail) order, 4,1,5,2,3
        result, _ = served.query("SELECT id, email FROM customers WHERE id = 1", call_id="t")
        assert result.rows[0][1] == "<masked>"
    finally:
        served.engine.close()


def test_a_reader_granted_the_whole_table_is_refused_under_the_operator(
    captured: PgScratch, tmp_path: Path
) -> None:
    captured.admin.execute(f"GRANT SELECT ON customers TO {captured.reader}")
    try:
        with pytest.raises(SqlConfigError, match="can read masked columns"):
            serve_masked(captured.reader_url, Path(masks_file(tmp_path, "'*.email'"))).engine.close()
    finally:
        captured.admin.execute(f"REVOKE SELECT ON customers FROM {captured.reader}")
        captured.admin.execute(f"GRANT SELECT (id, name) ON customers TO {captured.reader}")


def test_a_twin_of_a_catalog_operator_ahead_of_pg_catalog_is_a_start_up_finding(captured: PgScratch) -> None:
    """Every other reader of the catalog on the reader's session (SQLAlchemy's foreign keys, a
    literal rule's check, describe_table) would be answered by it too."""
    engine = SqlEngine(captured.reader_url)
    try:
        with engine.session(30.0, "t") as (conn, _):
            found = engine.profile.inspect(conn, engine.url, frozenset()).findings
    finally:
        engine.close()
    shown = [f.message for f in found if f.code == "catalog-operator"]
    assert any(m.startswith("operator public.>(smallint, smallint)") for m in shown), shown
