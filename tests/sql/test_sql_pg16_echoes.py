"""PostgreSQL 16 added `generate_series(timestamptz, timestamptz, interval, text)`, whose error quotes
its time zone whole (`time zone "..." not recognized`): a computed one of 20 MB came back as a 20 MB
message, which libpq and psycopg copy several times in the client (red team rt33a F1's channel). The
echoed-argument table (`postgres_echoed.ECHOED`, re-measured on 16.2 by `test_sql_pg_echo_table.py`)
lists it now, so the time zone gets the 1 MB guard of every quoted input.
"""

from __future__ import annotations

import pytest

from mcpkit.sql.admission import admit
from mcpkit.sql.errors import QueryFailed
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_admin, pg_service_fixture, rss_kb

MARKER = "mcpkit_search_bound"
SERIES = (
    "SELECT count(*) AS n FROM generate_series('2020-01-01'::timestamptz, '2020-01-02'::timestamptz,"
    " '1 hour'::interval, {zone})"
)

service = pg_service_fixture(10.0)


def test_a_computed_time_zone_of_generate_series_is_guarded() -> None:
    assert MARKER in admit(SERIES.format(zone="repeat('x', 20000000)"), "postgres").sql
    assert MARKER not in admit(SERIES.format(zone="'UTC'"), "postgres").sql  # a literal is as written
    assert MARKER not in admit("SELECT g FROM generate_series(1, 3) g", "postgres").sql


@pytest.mark.postgres
def test_postgres_16_a_large_time_zone_is_refused_before_it_is_quoted(
    service: SqlService, pg_url: str
) -> None:
    with pg_admin(pg_url) as c:
        version = int(str(c.execute("SELECT current_setting('server_version_num')").fetchone()[0]))  # type: ignore[index]
    if version < 160000:
        pytest.skip(f"generate_series with a time zone is PostgreSQL 16+ (server_version_num {version})")
    result, _ = service.query(SERIES.format(zone="'UT' || 'C'"), call_id="ok")
    assert result.rows[0][0] == 25
    before = rss_kb() // 1024
    with pytest.raises(QueryFailed) as info:
        service.query(SERIES.format(zone="repeat('x', 20000000)"), call_id="echo")
    assert info.value.kind == "resource", info.value.message  # unguarded: `data`, the zone quoted whole
    assert rss_kb() // 1024 - before < 32
