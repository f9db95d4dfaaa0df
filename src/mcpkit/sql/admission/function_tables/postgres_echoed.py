"""PostgreSQL 15: the allowlisted functions whose error quotes an argument whole, measured.

A function whose error (message, DETAIL, HINT, CONTEXT) or notice holds a computed argument whole
makes libpq and psycopg copy it several times in the client, as a failed cast's quoted input does:
`encode('a'::bytea, repeat('x', 60000000))` took the mcpkit process from 138 MB to 607 MB (red team
rt33a F1; rt21 F5: to_tsquery). This table is what `tests/sql/pg_echo_probe.py` finds calling every
overload on the allowlist with a marker in each argument a computed text (or text array, bytea, json)
reaches, one position at a time: printed by `bench/pg_echoed_inputs.py`, and
`tests/sql/test_sql_pg_echo_table.py` fails when the server finds a position this table lacks. By the
engine's name: argument positions from 0, the union over the overloads (`date_trunc`'s 2 is the time
zone of its three-argument form). Function-style casts (`int4(x)`) are bounded as casts. Re-run on
PostgreSQL 16.2, which added one position (`generate_series`'s time zone).
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

__all__ = ["ECHOED", "echo_excluded"]

ECHOED: Final[dict[str, tuple[int, ...]]] = {
    "convert": (1, 2),
    "convert_from": (1,),
    "convert_to": (1,),
    "date_add": (2,),  # PostgreSQL 16: the time zone
    "date_part": (0,),
    "date_subtract": (2,),  # PostgreSQL 16: the time zone
    "date_trunc": (0, 2),
    "decode": (1,),
    "encode": (1,),
    "extract": (0,),
    "generate_series": (3,),  # PostgreSQL 16's time zone of the timestamptz form
    "is_normalized": (1,),
    "json_populate_record": (1,),
    "json_to_record": (0,),
    "json_to_tsvector": (1, 2),
    "jsonb_insert": (1,),
    "jsonb_path_exists": (0,),
    "jsonb_path_exists_tz": (0,),
    "jsonb_path_match": (0,),
    "jsonb_path_match_tz": (0,),
    "jsonb_path_query": (0,),
    "jsonb_path_query_array": (0,),
    "jsonb_path_query_array_tz": (0,),
    "jsonb_path_query_first": (0,),
    "jsonb_path_query_first_tz": (0,),
    "jsonb_path_query_tz": (0,),
    "jsonb_populate_record": (1,),
    "jsonb_set": (1,),
    "jsonb_set_lax": (1,),
    "jsonb_to_record": (0,),
    "jsonb_to_tsvector": (1, 2),
    "length": (1,),
    "make_timestamptz": (6,),
    "normalize": (1,),
    "parse_ident": (0,),
    "pg_database_size": (0,),
    "pg_indexes_size": (0,),
    "pg_relation_size": (0,),
    "pg_size_bytes": (0,),
    "pg_table_size": (0,),
    "pg_total_relation_size": (0,),
    "timezone": (0,),
    "to_ascii": (1,),
    "to_date": (0,),
    "to_timestamp": (0,),
    "to_tsquery": (0, 1),
    "ts_headline": (2, 3),
    "ts_parse": (0,),
    "ts_token_type": (0,),
}


def echo_excluded(name: str, call: exp.Expr) -> bool:
    """Whether a call cannot quote an argument given its literal ones (`SearchBounds.echo_excluded`)."""
    # jsonb_path_*: of the item methods only `.datetime()` quotes a string of the target whole
    # ("datetime format is not recognized"; `@?` and `@@` are silent), so a literal path without it
    # leaves a large document as written (a guard would also print every row's document as text)
    if not name.startswith("jsonb_path_") or len(call.expressions) < 2:
        return False
    path = call.expressions[1].unnest()
    path = path.this if isinstance(path, exp.Cast) else path
    return isinstance(path, exp.Literal) and path.is_string and "datetime" not in path.this.lower()
