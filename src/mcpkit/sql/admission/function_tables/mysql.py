"""MySQL 8 and MariaDB 10.11: the reviewed function table (candidates: MariaDB's
`information_schema.SQL_FUNCTIONS` and the function categories of its help tables, which are built
from the MariaDB documentation; MySQL 8-only names are marked `in_catalog=False`)."""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from mcpkit.sql.admission.function_tables import (
    FunctionTable,
    GrowthBound,
    RelationRule,
    SearchBounds,
    SizeBound,
    family,
    relation_rule,
)

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


def _byte_length(operand: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this="OCTET_LENGTH", expressions=[operand])


def _fail(cond: exp.Expr, marker: str) -> exp.Expr:
    # error 1690 (BIGINT UNSIGNED out of range); its text quotes this expression, marker first (the
    # server cuts its messages at 512 bytes)
    marked = exp.Anonymous(this="OCTET_LENGTH", expressions=[exp.Literal.string(marker)])
    step = exp.Anonymous(this="LEAST", expressions=[marked, cond])
    overflow = exp.Add(this=exp.Literal.number(18446744073709551615), expression=step)
    return exp.EQ(this=exp.paren(overflow, copy=False), expression=exp.Literal.number(0))


def _converted_length(needle: exp.Expr, haystack: exp.Expr) -> exp.Expr:
    # CONCAT takes the haystack's character set (a literal needle coerces to it): ' ' is 4 bytes
    # beside a utf32 value, 1 beside utf8mb4
    empty = exp.Anonymous(this="LEFT", expressions=[haystack, exp.Literal.number(0)])
    return _byte_length(exp.Anonymous(this="CONCAT", expressions=[empty, needle]))


def _collation_cost(value: exp.Expr) -> exp.Expr:
    # Measured on MariaDB 10.11, LOCATE at a haystack x needle product of 4.9e7 (docs/security.md):
    # binary and *_bin 0.01-0.02 s; general_ci, unicode(_520)_ci, uca1400_ai_ci, 8-bit and language
    # *_ci up to 4x that (2-byte characters under general_ci); uca1400 *_as_*, *_cs, *_w2 (accent- or
    # case-sensitive, multi-level weights) 30-50x. A name this does not know costs the most.
    name = exp.Anonymous(this="COLLATION", expressions=[value])

    def like(pattern: str) -> exp.Expr:
        return exp.Like(this=name.copy(), expression=exp.Literal.string(pattern))

    binary = exp.or_(exp.EQ(this=name.copy(), expression=exp.Literal.string("binary")), like("%\\_bin"))
    plain = exp.and_(like("%\\_ci"), exp.Not(this=like("%\\_as\\_%")))
    return exp.Case(
        ifs=[
            exp.If(this=binary, true=exp.Literal.number(1)),
            exp.If(this=plain, true=exp.Literal.number(4)),
        ],
        default=exp.Literal.number(32),
    )


def _cost_factor(haystack: exp.Expr, needle: exp.Expr) -> exp.Expr:
    # each operand's own collation: the call compares in the one of them that wins coercion
    return exp.Anonymous(this="GREATEST", expressions=[_collation_cost(haystack), _collation_cost(needle)])


def _json_indent_factor(call: exp.Expr) -> exp.Expr | None:
    # JSON_DETAILED writes each value on its own line indented by depth x tab (tab at most 8): a
    # 3-byte `{},` becomes two lines, so each input byte yields at most (2/3)(8 depth + 1) + 1
    # bytes; 6 depth + 2 bounds that (measured: 161x at depth 31, tab 8). JSON_DEPTH is NULL for
    # a document that is not JSON, and JSON_DETAILED then answers NULL too.
    if not call.expressions:
        return None
    depth = exp.Anonymous(this="JSON_DEPTH", expressions=[call.expressions[0].copy()])
    per_level = exp.Mul(this=exp.Literal.number(6), expression=depth)
    return exp.Add(this=per_level, expression=exp.Literal.number(2))


def _json_extract_factor(call: exp.Expr) -> exp.Expr | None:
    # JSON_EXTRACT answers every value its paths match, with no size check: one path without `**`
    # at most the document (re-spaced: `[1,2]` as `[1, 2]`); each further path the document again;
    # a `**` path (or one computed at run time) each match's subtree, which holds the deeper
    # matches, so up to JSON_DEPTH copies of a byte (measured: 3.6 MB into 63 MB).
    paths = [p for p in (call.args.get("expression"), *call.expressions) if p is not None]
    wild = any(not isinstance(p, exp.JSONPath | exp.Literal) or "**" in p.sql("mysql") for p in paths)
    if len(paths) <= 1 and not wild:
        return None
    factor: exp.Expr = exp.Literal.number(2 * len(paths))
    if wild:
        depth = exp.Anonymous(this="JSON_DEPTH", expressions=[call.this.copy()])
        factor = exp.Mul(
            this=factor, expression=exp.paren(exp.Add(this=depth, expression=exp.Literal.number(1)))
        )
    return factor


def _search_paths_factor(call: exp.Expr) -> exp.Expr | None:
    # JSON_SEARCH(doc, 'all', ...) answers the path of every match, and a path holds every key above
    # its match: a 1-byte pattern over a 50 KB document under one 10 KB key answered 100 MB. A match
    # takes at least 3 bytes of the document and its path at most the document's keys plus an index
    # per level (MariaDB nests 32 deep), so matches x path <= bytes/3 x (bytes + 400). 'one' answers
    # one path.
    mode = call.expressions[1] if len(call.expressions) > 1 else None
    if isinstance(mode, exp.Literal) and mode.is_string and mode.this.casefold() == "one":
        return None
    document = call.expressions[0].copy()
    padded = exp.Add(this=_byte_length(document), expression=exp.Literal.number(400))
    return exp.IntDiv(this=exp.paren(padded, copy=False), expression=exp.Literal.number(3))


def _format_factor(call: exp.Expr) -> exp.Expr:
    # DATE_FORMAT and TIME_FORMAT answer each 2-byte specifier as up to a month or day name in the
    # session's lc_time_names, with no size check (a 10 MB format of `%W` answered 40 MB).
    return exp.Literal.number(16)


def _escaped_factor(call: exp.Expr) -> exp.Expr:
    # JSON_SET/INSERT/REPLACE/ARRAY_APPEND/ARRAY_INSERT, JSON_MERGE* and JSON_QUOTE answer their
    # arguments together, a string escaped (`"` as `\"`: twice its bytes), with no size check:
    # nested, each level doubles (four levels of JSON_MERGE_PRESERVE over 8 MB built 128 MB past
    # max_session_mem_used).
    return exp.Literal.number(2)


# Measured on MariaDB 10.11 (docs/security.md): LOCATE/INSTR/POSITION, SUBSTRING_INDEX and REPLACE's
# search about 2e9 compares/s, LIKE and JSON_SEARCH's LIKE match about 2e8, REPLACE's moves about
# 6e9 haystack^2/s, TRIM(TRAILING)'s rescans about 1e9 haystack^2/needle per s; none checks
# max_statement_time or KILL inside its loop.
_SEARCH: Final = 500_000_000
_LIKE: Final = 50_000_000
_TRIM: Final = 250_000_000
_PACKET: Final = 16 * 1024 * 1024  # max_allowed_packet's default: what REPEAT, CONCAT, CONVERT may build
_REGEX: Final = 250_000_000  # PCRE rescanning the rest of the subject: about 1e9 byte pairs/s
_TRIM_BOUND: Final = SizeBound("this", "expression", _TRIM, removal=True)
_REGEX_BOUND: Final = SizeBound("this", "expression", _REGEX, pattern=True)
_JSON_DETAILED: Final = GrowthBound("#0", _json_indent_factor, _PACKET)
_JSON_JOINED: Final = GrowthBound("*", _escaped_factor, _PACKET)
_JSON_GROWTHS: Final = {
    "json_detailed": _JSON_DETAILED,
    "json_pretty": _JSON_DETAILED,
    "json_extract": GrowthBound("this", _json_extract_factor, _PACKET),
    "json_quote": GrowthBound("#0", _escaped_factor, _PACKET),
    "json_search": GrowthBound("#0", _search_paths_factor, _PACKET),
    "date_format": GrowthBound("format", _format_factor, _PACKET),
    "time_format": GrowthBound("#1", _format_factor, _PACKET),
    "make_set": GrowthBound("*", _escaped_factor, _PACKET),
    **dict.fromkeys(
        [
            "json_set",
            "json_insert",
            "json_replace",
            "json_array_append",
            "json_array_insert",
            "json_merge",
            "json_merge_preserve",
            "json_merge_patch",
        ],
        _JSON_JOINED,
    ),
}
SIZE_BOUNDS: Final = SearchBounds(
    calls={
        "locate": SizeBound("this", "substr", _SEARCH),  # LOCATE, INSTR, POSITION(... IN ...)
        "replace": SizeBound(
            "this", "expression", _SEARCH, growth="replacement", growth_budget=1_500_000_000
        ),
        "substring_index": SizeBound("this", "delimiter", _SEARCH),
        "json_search": SizeBound("#0", "#2", _LIKE),
        "trim": _TRIM_BOUND,  # TRIM([BOTH | TRAILING] ...); LEADING is cheap
        "rtrim": _TRIM_BOUND,
        "regexp_like": _REGEX_BOUND,  # REGEXP, RLIKE, NOT REGEXP
        "regexp_instr": _REGEX_BOUND,
        "regexp_substr": _REGEX_BOUND,
    },
    like=SizeBound("this", "expression", _LIKE),
    ilike=None,
    byte_length=_byte_length,
    fail=_fail,
    varying=frozenset(["rand", "uuid", "uuid_short", "sysdate", "random_bytes", "sys_guid"]),
    growths=_JSON_GROWTHS,
    converted_length=_converted_length,
    cost_factor=_cost_factor,
)
"""The string searches admission bounds (`mcpkit.sql.admission.bound_searches`)."""
