"""PostgreSQL SQL functions whose own settings read their string body otherwise than the checks.

A LANGUAGE sql function with a string body (`AS '...'`) is parsed each time it runs, under its own
`SET` clauses (`proconfig`), not the session's: each call pins `standard_conforming_strings` on
(`session`), which the function's `SET standard_conforming_strings = off` undoes while it runs.
The order check reads the body with standard strings, so `ORDER BY 'a\\', id, ' -- '` read as a
string, the primary key and a string while PostgreSQL read one string and a comment, the heap order
of a table CLUSTERed on a masked column (red team rt30 F4b). So a string body whose function sets
anything not in `READ_ALIKE` (the settings that leave how text is read as it is: memory, planner,
timeouts, formats of values) counts as unreadable: refused by the order check, opt-in
`function-order:` only (`function-config:` vouches for the setting, not for the body). `search_path`
is resolved for the body on its own (`fnpath`). Such a setting also holds for every body parsed
while the function runs: `a() SET standard_conforming_strings = off BEGIN ATOMIC SELECT b(); END`
made PostgreSQL read b's string body with non-standard strings (red team rt31 F5). So a function of
any language and body kind, and a procedure, with such a setting counts as unreadable itself
(and as a per-row one, as every user function does: `routine_state`), whatever it reads: its
callers and the views over it with it (`stored`). Each call pins `standard_conforming_strings`
and `search_path` over role and database defaults (`session.PINNED_SETTINGS`); the other settings
outside `READ_ALIKE` are left as the server, database and role set them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["READ_ALIKE", "READ_ALIKE_PREFIXES", "foreign_settings"]

READ_ALIKE: Final = frozenset(
    {
        "search_path",  # resolved under both paths (`fnpath`)
        # time and memory limits, parallel workers, identity (`fnconfig` refuses most of these)
        "statement_timeout",
        "lock_timeout",
        "idle_in_transaction_session_timeout",
        "idle_session_timeout",
        "application_name",
        "work_mem",
        "hash_mem_multiplier",
        "maintenance_work_mem",
        "temp_buffers",
        "temp_file_limit",
        "max_parallel_workers_per_gather",
        "max_parallel_workers",
        "max_parallel_maintenance_workers",
        "debug_parallel_query",
        "force_parallel_mode",
        "parallel_leader_participation",
        "default_transaction_read_only",
        "transaction_read_only",
        "default_transaction_isolation",
        "default_transaction_deferrable",
        "role",
        "session_authorization",
        "row_security",
        # the planner's costs and limits
        "random_page_cost",
        "seq_page_cost",
        "cpu_tuple_cost",
        "cpu_index_tuple_cost",
        "cpu_operator_cost",
        "parallel_setup_cost",
        "parallel_tuple_cost",
        "min_parallel_table_scan_size",
        "min_parallel_index_scan_size",
        "effective_cache_size",
        "effective_io_concurrency",
        "default_statistics_target",
        "constraint_exclusion",
        "cursor_tuple_fraction",
        "from_collapse_limit",
        "join_collapse_limit",
        "plan_cache_mode",
        "recursive_worktable_factor",
        "jit",
        "geqo",
        # formats and locales of values, messages
        "timezone",
        "datestyle",
        "intervalstyle",
        "extra_float_digits",
        "bytea_output",
        "lc_messages",
        "lc_monetary",
        "lc_numeric",
        "lc_time",
        "default_text_search_config",
        "client_min_messages",
        "escape_string_warning",  # a warning, the text reads the same
        "check_function_bodies",
        "synchronous_commit",
        "default_tablespace",
        "temp_tablespaces",
    }
)
"""Settings (lower case) a function may set for itself while its string body still reads as the
checks read it. Every other one counts: `standard_conforming_strings`, `backslash_quote`,
`transform_null_equals`, `array_nulls`, an extension's `x.y`, one unknown."""
READ_ALIKE_PREFIXES: Final = ("enable_", "jit_", "geqo_", "log_")
"""Setting name prefixes of the same kind (the planner's switches, JIT and GEQO tuning, logging)."""


def foreign_settings(config: Iterable[str] | None) -> str:
    """The entries (`name=value`) of a function's `proconfig` not read alike, comma-separated ('' if none).

    >>> foreign_settings(["search_path=public", "standard_conforming_strings=off", "enable_seqscan=off"])
    'standard_conforming_strings=off'
    """
    out = []
    for entry in config or ():
        name = entry.partition("=")[0].strip().lower()
        if name not in READ_ALIKE and not name.startswith(READ_ALIKE_PREFIXES):
            out.append(entry)
    return ", ".join(out)
