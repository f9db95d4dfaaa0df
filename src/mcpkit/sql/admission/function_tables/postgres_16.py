"""PostgreSQL 16's new `pg_catalog` functions, reviewed one by one (each its own reason).

They are `in_catalog=False`: on 15 they do not exist, so the "every allowed name exists" check of
`tests/sql/test_sql_function_tables.py` skips them; `tests/sql/test_sql_pg16_functions.py` checks
them on 16. The `pg_stat_get_*` additions fall under the never family of other sessions' activity.
"""

from __future__ import annotations

from typing import Final

from mcpkit.sql.admission.function_tables import Family, family

__all__ = ["PG16"]


def _one(verdict: str, why: str, names: str) -> Family:
    return family(f"PostgreSQL 16: {names}", verdict, why, names, in_catalog=False)  # type: ignore[arg-type]


PG16: Final[tuple[Family, ...]] = (
    _one(
        "allowed", "an arbitrary value of the group (refused over a masked read: masking.ties)", "any_value"
    ),
    _one(
        "allowed",
        "JSON aggregates that skip NULLs or reject duplicate keys (JSON_ARRAYAGG, JSON_OBJECTAGG)",
        "json_agg_strict jsonb_agg_strict json_object_agg_strict jsonb_object_agg_strict "
        "json_object_agg_unique jsonb_object_agg_unique json_object_agg_unique_strict "
        "jsonb_object_agg_unique_strict",
    ),
    _one("allowed", "a timestamptz plus or minus an interval in a named time zone (stable)", "date_add"),
    _one("allowed", "a timestamptz minus an interval in a named time zone (stable)", "date_subtract"),
    _one("allowed", "the error function and its complement (pure math)", "erf erfc"),
    _one(
        "allowed",
        "SQL/JSON constructors and aggregates (SQL syntax; the aggregates are limited like json_agg)",
        "json_array json_arrayagg json_objectagg",
    ),
    _one(
        "allowed",
        "the session's own authentication method and identity (SQL syntax, like session_user)",
        "system_user",
    ),
    _one(
        "allowed",
        "a normally distributed random number: random()'s generator, which changes nothing (refused "
        "over a masked read like random(): Profile.guessable_random)",
        "random_normal",
    ),
    _one(
        "absent",
        "permutes or samples an array with the server's global generator (pg_global_prng_state, also "
        "behind TABLESAMPLE and ANALYZE), whose draws give its state; ORDER BY random() samples rows",
        "array_shuffle array_sample",
    ),
    _one(
        "absent",
        "runs the input function of a type named in a string (a domain's checks included), which "
        "admission never sees; a cast says the same",
        "pg_input_is_valid",
    ),
    _one(
        "absent",
        "returns the type's error message, which quotes the input whole (an echo of the value), for a "
        "type named in a string",
        "pg_input_error_info",
    ),
    _one("absent", "splits a WAL file name (server internals)", "pg_split_walfile_name"),
    _one("absent", "the transition function behind any_value; call the aggregate", "any_value_transfn"),
    _one("never", "writes a WAL record (a lasting change per call)", "pg_log_standby_snapshot"),
)
"""The families of PostgreSQL 16's additions (16.2's `pg_proc` against 15's)."""
