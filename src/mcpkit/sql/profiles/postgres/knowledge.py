"""What mcpkit knows about PostgreSQL functions: which built-ins must stay unreachable, which
extensions run SQL from text, which volatile functions only draw random numbers or read.

Built-ins are executable by PUBLIC and cannot be revoked for one role without changing the whole
database, so the parser refuses them in query text and the start-up audit refuses any object the
role can use (view, policy, domain, operator, cast, function default or SQL-standard body) that
calls one of them.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Final

__all__ = ["HARMLESS_VOLATILE", "ROLES", "STRING_SQL_EXTENSIONS", "UNREACHABLE", "unreachable_reason"]

# pg_catalog functions no query may reach, by what they would do (name or `prefix*`).
UNREACHABLE: Final[dict[str, tuple[str, ...]]] = {
    "burns a transaction id": (
        "txid_current",
        "pg_current_xact_id",
        "lo_*",
        "lowrite",
        "loread",
    ),
    "shows other sessions' queries": (
        "pg_stat_get_activity",
        "pg_stat_get_backend_activity",
        "pg_stat_get_backend_activity_start",
        "pg_stat_get_backend_client_addr",
        "pg_stat_get_backend_userid",
    ),
    "signals or stops sessions": (
        "pg_cancel_backend",
        "pg_terminate_backend",
        "pg_reload_conf",
        "pg_rotate_logfile*",
        "pg_log_backend_memory_contexts",
        "pg_promote",
    ),
    "takes locks that outlive the statement": ("pg_advisory*", "pg_try_advisory*"),
    "sleeps": ("pg_sleep*",),
    "runs SQL from a string": (
        "query_to_xml*",
        "cursor_to_xml*",
        "table_to_xml*",
        "schema_to_xml*",
        "database_to_xml*",
        "ts_stat",
        "ts_rewrite",
    ),
    "reads or lists server files": ("pg_read_file", "pg_read_binary_file", "pg_ls_*", "pg_stat_file"),
    "changes settings or sequences": ("set_config", "setseed", "nextval", "setval"),
    "sends messages or changes server state": (
        "pg_notify",
        "pg_logical_emit_message",
        "pg_switch_wal",
        "pg_create_*",
        "pg_drop_replication_slot",
        "pg_replication_*",
        "pg_logical_slot_*",
        "pg_copy_*_replication_slot",
        "pg_stat_reset*",
        "pg_backup_*",
        "pg_wal_replay_*",
        "brin_summarize*",
        "brin_desummarize_range",
        "gin_clean_pending_list",
        "pg_import_system_collations",
        "pg_nextoid",
        "binary_upgrade_*",
    ),
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
        "uuid_generate_v1",
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
        "pg_blocking_pids",
        "pg_lock_status",
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
}


def unreachable_reason(name: str) -> str | None:
    """Why a pg_catalog function must stay unreachable, or None.

    >>> unreachable_reason("txid_current"), unreachable_reason("lower")
    ('burns a transaction id', None)
    >>> unreachable_reason("pg_copy_logical_replication_slot")
    'sends messages or changes server state'
    """
    for reason, patterns in UNREACHABLE.items():
        if any(fnmatchcase(name, p) if "*" in p else name == p for p in patterns):
            return reason
    return None
