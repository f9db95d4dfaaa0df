"""What mcpkit knows about PostgreSQL functions: which built-ins must stay unreachable, which
extensions run SQL from text, which volatile functions only draw random numbers or read.

Built-ins are executable by PUBLIC and cannot be revoked for one role without changing the whole
database, so the parser refuses them in query text and the start-up audit refuses any object the
role can use (view, policy, domain, operator, cast, function default or SQL-standard body) that
calls one of them.
"""

from __future__ import annotations

from typing import Final

from mcpkit.sql.admission.function_tables.postgres import POSTGRES

__all__ = ["HARMLESS_VOLATILE", "ROLES", "STRING_SQL_EXTENSIONS", "UNREACHABLE", "unreachable_reason"]

# pg_catalog functions no query may reach, by what they would do (names and `prefix*` patterns):
# the admission table's never families, the one list both admission and the start-up audit read.
UNREACHABLE: Final[dict[str, tuple[str, ...]]] = {
    family.why: tuple(sorted(family.names)) for family in POSTGRES.families if family.verdict == "never"
}

# Extensions whose functions run SQL carried in a string, or reach other servers.
STRING_SQL_EXTENSIONS: Final = frozenset({"tablefunc", "xml2", "dblink", "postgres_fdw"})

# Volatile functions that only read or draw random numbers (pg_catalog and common extensions).
HARMLESS_VOLATILE: Final = frozenset(
    {
        "random",
        "random_normal",
        "clock_timestamp",
        "timeofday",
        "gen_random_uuid",
        "gen_random_bytes",
        "gen_salt",
        "uuid_generate_v1mc",
        "uuid_generate_v4",
        "pg_relation_size",
        "pg_total_relation_size",
        "pg_table_size",
        "pg_indexes_size",
        "pg_database_size",
        "pg_tablespace_size",
        "pg_partition_tree",
        "pg_partition_ancestors",
        "pg_is_in_recovery",
        "pg_jit_available",
        "currval",
        "lastval",
        "pg_sequence_last_value",
    }
)

# Predefined roles a reader must not be a member of, directly or through another role.
ROLES: Final[dict[str, str]] = {
    "pg_signal_backend": "can cancel and terminate other roles' sessions",
    "pg_read_server_files": "can read any file the server can",
    "pg_write_server_files": "can write files on the database host",
    "pg_execute_server_program": "can run programs on the database host",
    "pg_read_all_stats": "sees every session's SQL text, literals included",
    "pg_read_all_settings": "reads every setting, server file paths included (data_directory, hba_file, ...)",
    "pg_monitor": "sees every session's SQL text and server state",
    "pg_read_all_data": "reads every table, past the grants mcpkit verifies",
    "pg_write_all_data": "can write every table",
    "pg_checkpoint": "can force checkpoints",
    # PostgreSQL 16 and 17 (a name the server lacks matches no role)
    "pg_create_subscription": "can create subscriptions that connect to other servers",
    "pg_use_reserved_connections": "can take the connection slots reserved for administrators",
    "pg_maintain": "can VACUUM, ANALYZE, CLUSTER, REINDEX, REFRESH and LOCK every table",
}


def unreachable_reason(name: str) -> str | None:
    """Why a pg_catalog function must stay unreachable (its admission never family), or None.

    >>> unreachable_reason("txid_current"), unreachable_reason("lower")
    ('assigns a transaction id (a lasting change per call)', None)
    """
    found = POSTGRES.lookup(name)
    return found.why if found is not None and found.verdict == "never" else None
