"""MySQL 8 and MariaDB 10.11: the reviewed function table (candidates: MariaDB's
`information_schema.SQL_FUNCTIONS` and the function categories of its help tables, which are built
from the MariaDB documentation; MySQL 8-only names are marked `in_catalog=False`)."""

from __future__ import annotations

from typing import Final

from mcpkit.sql.admission.function_tables import (
    FunctionTable,
    RelationRule,
    family,
    relation_rule,
)
from mcpkit.sql.admission.function_tables.mysql_bounds import SIZE_BOUNDS

__all__ = ["MYSQL", "NEVER_RELATIONS", "SIZE_BOUNDS"]

# Other sessions' statements and the server's internals; none is needed to analyse data.
NEVER_RELATIONS: Final[tuple[RelationRule, ...]] = (
    relation_rule(
        "information_schema",
        "shows other sessions' SQL text or transactions",
        "processlist innodb_trx innodb_locks innodb_lock_waits user_statistics client_statistics",
    ),
    relation_rule(
        "information_schema",
        "shows the server's settings, file paths included (datadir, log_error, plugin_dir)",
        "global_variables session_variables global_status session_status system_variables",
    ),
    relation_rule(
        "information_schema",
        "counts the server's reads and writes across sessions (red team my13, F3)",
        "key_caches innodb_buffer_pool_stats innodb_metrics innodb_buffer_page innodb_buffer_page_lru "
        "table_statistics index_statistics",
    ),
    relation_rule("performance_schema", "shows other sessions' SQL text and server internals", "*"),
    relation_rule("sys", "shows other sessions' SQL text and server internals", "*"),
    relation_rule("mysql", "holds the server's accounts and internal state", "*"),
)

_NEVER = (
    family("sleeping", "never", "sleeps or burns CPU on purpose", "sleep benchmark"),
    family(
        "locks",
        "never",
        "takes, releases or inspects named locks",
        "get_lock release_lock release_all_locks is_used_lock is_free_lock",
    ),
    family(
        "waiting on replication",
        "never",
        "blocks until a replication position is reached",
        "master_pos_wait source_pos_wait master_gtid_wait wait_for_executed_gtid_set "
        "wait_until_sql_thread_after_gtids wsrep_sync_wait_upto_gtid wsrep_last_seen_gtid "
        "wsrep_last_written_gtid",
    ),
    family("files", "never", "reads a server file", "load_file"),
    family(
        "writes and session state",
        "never",
        "changes session state (LAST_INSERT_ID(expr) sets it) or a sequence",
        "last_insert_id nextval setval lastval",
    ),
    family(
        "known command-running UDFs",
        "never",
        "user-defined functions that run shell commands",
        "sys_exec sys_eval sys_get sys_set lib_mysqludf_*",
    ),
)

_ALLOWED = (
    family(
        "SQL syntax",
        "allowed",
        "syntax the parser models as a function call",
        "cast convert extract coalesce nullif greatest least if case interval exists row like rlike regexp "
        "position trim "
        "current_date current_time current_timestamp localtime localtimestamp current_user",
        in_catalog=False,
    ),
    family(
        "aggregates",
        "allowed",
        "aggregates and statistics",
        "count sum avg min max group_concat bit_and bit_or bit_xor std stddev stddev_pop stddev_samp "
        "variance var_pop var_samp json_arrayagg",
    ),
    family(
        "window",
        "allowed",
        "window functions (MEDIAN and PERCENTILE_* are MariaDB's window-only forms)",
        "rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value "
        "nth_value median percentile_cont percentile_disc",
    ),
    family(
        "math",
        "allowed",
        "arithmetic, rounding, trigonometry, base conversion; RAND changes nothing",
        "abs acos asin atan atan2 ceil ceiling conv cos cot crc32 crc32c degrees div exp floor ln log log10 "
        "log2 mod oct pi pow power radians rand round sign sin sqrt tan truncate format",
    ),
    family(
        "strings",
        "allowed",
        "string functions, hashes, encodings",
        "ascii bin bit_length char char_length character_length chr concat concat_ws elt export_set field "
        "find_in_set from_base64 hex insert instr lcase left length lengthb locate lower lpad ltrim "
        "make_set md5 mid natural_sort_key octet_length ord quote repeat replace reverse right rpad rtrim "
        "sha sha1 sha2 soundex space strcmp substr substring substring_index to_base64 to_char "
        "ucase unhex upper weight_string bit_count",
    ),
    family(
        "regular expressions",
        "allowed",
        "PCRE (MariaDB) and ICU (MySQL 8) regular expressions",
        "regexp_instr regexp_substr",
    ),
    family(
        "date and time",
        "allowed",
        "dates, times, intervals, time zones, the clock",
        "adddate addtime add_months convert_tz curdate curtime date datediff date_add date_format "
        "date_sub day dayname dayofmonth dayofweek dayofyear from_days from_unixtime get_format hour "
        "last_day makedate maketime microsecond minute month monthname months_between now period_add "
        "period_diff quarter second sec_to_time str_to_date subdate subtime sysdate timediff "
        "timestampadd timestampdiff time_format time_to_sec to_date to_days to_seconds trunc "
        "unix_timestamp utc_date utc_time utc_timestamp week weekday weekofyear year yearweek "
        "format_pico_time",
    ),
    family(
        "JSON",
        "allowed",
        "JSON construction, extraction, search and modification of a value",
        "json_array json_array_append json_array_insert json_compact json_contains json_contains_path "
        "json_depth json_detailed json_equals json_exists json_extract json_insert json_keys json_length "
        "json_loose json_merge json_merge_patch json_merge_preserve json_normalize json_object "
        "json_overlaps json_pretty json_query json_quote json_remove json_replace json_search json_set "
        "json_type json_unquote json_valid json_value",
    ),
    family(
        "control flow, null handling, UUIDs, addresses",
        "allowed",
        "IF/IFNULL/NVL, UUID generation, IP address conversion, collation and charset of a value",
        "ifnull isnull nvl nvl2 decode_oracle uuid_v4 uuid_v7 inet_aton inet_ntoa "
        "inet6_aton inet6_ntoa is_ipv4 is_ipv4_compat is_ipv4_mapped is_ipv6 charset collation "
        "coercibility database schema current_role",
    ),
)

_KEYWORDS = (
    family(
        "keywords that are functions",
        "allowed",
        "functions whose names are reserved words (so not in SQL_FUNCTIONS)",
        "row_number time timestamp json_table",
        in_catalog=False,
    ),
)

_MYSQL8 = (
    family(
        "MySQL 8 only",
        "allowed",
        "MySQL 8 functions MariaDB lacks (not in the MariaDB catalog the table was checked against)",
        "any_value regexp_like grouping bin_to_uuid uuid_to_bin is_uuid json_schema_valid "
        "json_schema_validation_report json_storage_size json_storage_free json_memberof "
        "member_of",
        in_catalog=False,
    ),
)

_ABSENT = (
    family(
        "XML",
        "absent",
        "XPath over an XML string: its cost grows with the nodes to a power the query chooses, and the "
        "server goes on evaluating it after the call is killed",
        "extractvalue updatexml",
    ),
    family(
        "regular expression replacement",
        "absent",
        "REGEXP_REPLACE is quadratic in its subject even for a one-character pattern (20,000 characters "
        "0.2 s, 9,000,000 about a day) and checks neither KILL nor max_statement_time while it runs",
        "regexp_replace",
    ),
    family(
        "aggregates past the session's limits",
        "absent",
        "JSON_OBJECTAGG is bounded neither by group_concat_max_len (as JSON_ARRAYAGG is) nor by "
        "max_session_mem_used: 1,000 rows of 1 MB built a 1 GB value and grew the server 1 GB per call",
        "json_objectagg",
    ),
    family(
        "formatting past the packet",
        "absent",
        "SFORMAT answers NULL with no warning when its result passes max_allowed_packet "
        "('{:>17000000}'), where REPEAT and LPAD fail",
        "sformat",
    ),
    family(
        "server and session state",
        "absent",
        "reports on this server or session, or depends on the previous statement (UUID() and"
        " SYS_GUID() are version 1: their last field is the host's MAC address, red team my13 F7)",
        "version connection_id user session_user system_user found_rows row_count binlog_gtid_pos "
        "uuid sys_guid "
        "decode_histogram rownum schemas default",
    ),
    family(
        "encryption and compression",
        "absent",
        "needs key material in the query text, or inflates data (decompression)",
        "aes_encrypt aes_decrypt des_encrypt des_decrypt encrypt encode decode password old_password "
        "compress uncompress uncompressed_length random_bytes",
    ),
    family(
        "dynamic columns and oddities",
        "absent",
        "rarely useful, Oracle-compatibility spellings, or generate unique ids from a server counter",
        "column_check column_exists column_json column_list column_get column_add column_create "
        "column_delete name_const uuid_short to_number format_bytes concat_operator_oracle "
        "lpad_oracle ltrim_oracle replace_oracle rpad_oracle rtrim_oracle substr_oracle trim_oracle "
        "values value old_value last_value_oracle",
    ),
)

MYSQL: Final = FunctionTable("mysql", _NEVER + _ALLOWED + _KEYWORDS + _MYSQL8 + _ABSENT)
