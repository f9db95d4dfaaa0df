"""PostgreSQL 16's new built-in functions are reviewed one by one (`function_tables.postgres_16`):
the pure ones answer, the ones that draw from the server's global generator, run a type's input
function named in a string or echo their input are left out, and the WAL writer is never allowed.

`date_add(ts, interval, zone)` was read by sqlglot as MySQL's DATE_ADD (the zone taken for a unit)
and sent as `ts + interval`: a silently different answer across a daylight-saving change.
"""

from __future__ import annotations

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import admit, table_for
from mcpkit.sql.service import SqlService
from tests.sql.sql_support import pg_admin, pg_service_fixture
from tests.sql.test_sql_function_tables import _PG_CANDIDATES as PG_CANDIDATES

service = pg_service_fixture(10.0)

VERDICTS = {
    "any_value": "allowed",
    "erf": "allowed",
    "erfc": "allowed",
    "date_add": "allowed",
    "date_subtract": "allowed",
    "random_normal": "allowed",
    "json_agg_strict": "allowed",
    "jsonb_object_agg_unique_strict": "allowed",
    "json_array": "allowed",
    "json_arrayagg": "allowed",
    "system_user": "allowed",
    "array_shuffle": "absent",
    "array_sample": "absent",
    "pg_input_is_valid": "absent",
    "pg_input_error_info": "absent",
    "pg_split_walfile_name": "absent",
    "any_value_transfn": "absent",
    "pg_log_standby_snapshot": "never",
    "pg_stat_get_io": "never",
    "pg_stat_get_lastscan": "never",
}
# 16.2's pg_catalog functions 15 lacks (the candidates of test_sql_function_tables.py)
NEW_IN_16 = [
    "any_value",
    "any_value_transfn",
    "array_sample",
    "array_shuffle",
    "date_add",
    "date_subtract",
    "erf",
    "erfc",
    "json_agg_strict",
    "json_object_agg_strict",
    "json_object_agg_unique",
    "json_object_agg_unique_strict",
    "jsonb_agg_strict",
    "jsonb_object_agg_strict",
    "jsonb_object_agg_unique",
    "jsonb_object_agg_unique_strict",
    "pg_input_error_info",
    "pg_input_is_valid",
    "pg_log_standby_snapshot",
    "pg_split_walfile_name",
    "pg_stat_get_backend_subxact",
    "pg_stat_get_db_conflict_logicalslot",
    "pg_stat_get_io",
    "pg_stat_get_lastscan",
    "pg_stat_get_tuples_newpage_updated",
    "pg_stat_get_xact_tuples_newpage_updated",
    "random_normal",
    "system_user",
]
ZONED = (
    "SELECT extract(epoch FROM {f}('2026-03-28 12:00+00'::timestamptz, interval '1 day', 'Europe/Paris'))"
    " - extract(epoch FROM '2026-03-28 12:00+00'::timestamptz) AS seconds"
)


def _version(pg_url: str) -> int:
    with pg_admin(pg_url) as c:
        return int(str(c.execute("SELECT current_setting('server_version_num')").fetchone()[0]))  # type: ignore[index]


def _need_16(pg_url: str) -> None:
    if (version := _version(pg_url)) < 160000:
        pytest.skip(f"these functions are PostgreSQL 16+ (server_version_num {version})")


def test_each_new_function_has_its_own_verdict_and_reason() -> None:
    from mcpkit.sql.admission.function_tables.postgres_16 import (
        PG16,
    )  # absent before: the other tests still run

    table = table_for("postgres")
    got = {name: getattr(table.lookup(name), "verdict", None) for name in VERDICTS}
    assert got == VERDICTS
    assert all(table.lookup(n) is not None for n in NEW_IN_16)
    assert all(f.why and f.name.startswith("PostgreSQL 16") for f in PG16)


@pytest.mark.parametrize("f", ["date_add", "date_subtract"])
def test_date_add_keeps_its_time_zone(f: str) -> None:
    sent = admit(f"SELECT {f}(now(), interval '1 day', 'Europe/Paris')", "postgres").sql
    assert sent == f"SELECT {f}(CURRENT_TIMESTAMP, INTERVAL '1 DAY', 'Europe/Paris')"


@pytest.mark.postgres
def test_postgres_16_the_new_functions_exist_as_reviewed(pg_url: str) -> None:
    _need_16(pg_url)
    with pg_admin(pg_url) as c:
        names = {r[0] for r in c.execute("SELECT proname FROM pg_proc WHERE proname = ANY(%s)", [NEW_IN_16])}
    assert sorted(set(NEW_IN_16) - names) == []


@pytest.mark.postgres
def test_postgres_16_the_allowed_new_functions_answer(service: SqlService, pg_url: str) -> None:
    _need_16(pg_url)
    result, _ = service.query(
        "SELECT any_value(x) AS v, round(erf(0.5)::numeric, 4) AS e, round(erfc(0.5)::numeric, 4) AS c,"
        " random_normal(0, 1) IS NOT NULL AS r, json_agg_strict(y)::text AS j, JSON_ARRAY(1, 2)::text AS a,"
        " JSON_ARRAYAGG(x)::text AS g, '{}' IS JSON OBJECT AS o"
        " FROM (VALUES (1, NULL), (1, 2)) t(x, y)",
        call_id="new16",
    )
    assert [list(r) for r in result.rows] == [[1, 0.5205, 0.4795, True, "[2]", "[1, 2]", "[1, 1]", True]]


@pytest.mark.postgres
@pytest.mark.parametrize(("f", "seconds"), [("date_add", 23 * 3600), ("date_subtract", -24 * 3600)])
def test_postgres_16_date_add_answers_in_its_time_zone(
    service: SqlService, pg_url: str, f: str, seconds: int
) -> None:
    """Paris changes to summer time on 2026-03-29: the day after the 28th is 23 hours long there
    (`ts + interval '1 day'` in a UTC session is 24); the day before, 24."""
    _need_16(pg_url)
    result, _ = service.query(ZONED.format(f=f), call_id=f)
    assert float(result.rows[0][0]) == seconds


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT array_shuffle(ARRAY[1, 2, 3]) AS a",
        "SELECT array_sample(ARRAY[1, 2, 3], 2) AS a",
        "SELECT pg_input_is_valid('1', 'int4') AS a",
        "SELECT message FROM pg_input_error_info('xyz', 'int4')",
        "SELECT pg_log_standby_snapshot() AS a",
    ],
)
def test_postgres_16_the_left_out_new_functions_are_refused(
    service: SqlService, pg_url: str, sql: str
) -> None:
    _need_16(pg_url)
    with pytest.raises(Refused) as info:
        service.query(sql, call_id="refused16")
    assert sql.split("(")[0].split()[-1] in info.value.message


@pytest.mark.postgres
def test_postgres_every_builtin_is_reviewed_without_contrib(pg_url: str) -> None:
    """`test_sql_function_tables.py`'s review of pg_catalog alone: it runs on a build without the
    contrib extensions (that test creates them), so 16.2 from pgserver is checked too."""
    with pg_admin(pg_url) as c:
        builtin = {r[0] for r in c.execute(PG_CANDIDATES, ["pg_catalog"]).fetchall()}
    table = table_for("postgres")
    assert len(builtin) > 1000
    assert sorted(n for n in builtin if n.replace("_", "").isalnum() and table.lookup(n) is None) == []
