"""PostgreSQL 15: the reviewed function table (candidates: `pg_proc` in `pg_catalog`, plus the
contrib extensions an operator commonly installs; see the package docstring for the verdicts).
16's additions are reviewed in `postgres_16`."""

from __future__ import annotations

from typing import Final

from mcpkit.sql.admission.function_tables import (
    FunctionTable,
    RelationRule,
    family,
    relation_rule,
)
from mcpkit.sql.admission.function_tables.postgres_16 import PG16
from mcpkit.sql.admission.function_tables.postgres_bounds import SIZE_BOUNDS
from mcpkit.sql.admission.function_tables.postgres_catalogs import CATALOG_NEVER

__all__ = ["COLLECTING_AGGREGATES", "NEVER_RELATIONS", "POSTGRES", "SIZE_BOUNDS"]

# Catalog views over other sessions and server internals (any schema: pg_stat_statements lives
# where its extension was created). A view over them is refused at start-up (routes.py).
NEVER_RELATIONS: Final[tuple[RelationRule, ...]] = (
    relation_rule(
        None,
        "shows other sessions' SQL text, locks, prepared transactions, progress or connections",
        "pg_stat_activity pg_locks pg_prepared_xacts pg_stat_statements pg_stat_statements_info "
        "pg_stat_progress_* pg_stat_replication pg_stat_wal_receiver pg_stat_subscription pg_stat_ssl "
        "pg_stat_gssapi pg_replication_slots pg_stat_replication_slots pg_backend_memory_contexts",
    ),
    relation_rule(
        None,
        "shows other sessions' cumulative activity (scans, row counts, commits, I/O) on tables, "
        "functions and databases, also ones the role cannot read",
        "pg_stat_* pg_statio_*",
    ),
    relation_rule(
        None,
        "shows other roles' settings, comments and function sources (secrets set with ALTER ROLE ... "
        "SET or written into a function body or a comment included)",
        "pg_db_role_setting pg_roles pg_user pg_shadow pg_authid pg_proc pg_shdescription",
    ),
    relation_rule(
        None,
        "shows server configuration files and file paths",
        "pg_settings pg_file_settings pg_hba_file_rules pg_ident_file_mappings pg_config",
    ),
    *CATALOG_NEVER,
)

_NEVER = (
    family(
        "SQL carried in text",
        "never",
        "runs SQL given as a string, which admission never sees (or reads whole tables past masks)",
        "query_to_xml* cursor_to_xml* table_to_xml* schema_to_xml* database_to_xml* ts_stat ts_rewrite "
        "crosstab* connectby* xpath_table xslt_process dblink* postgres_fdw_*",
    ),
    family(
        "transaction ids",
        "never",
        "assigns a transaction id (a lasting change per call)",
        "txid_current pg_current_xact_id",
    ),
    family(
        "other sessions' activity",
        "never",
        "shows other sessions' SQL, locks, prepared transactions, progress or cumulative statistics",
        "pg_stat_get_* pg_stat_have_stats pg_blocking_pids pg_safe_snapshot_blocking_pids "
        "pg_lock_status pg_isolation_test_session_is_blocked pg_prepared_xact pg_get_replication_slots",
    ),
    family(
        "signals and server control",
        "never",
        "signals a backend or controls the server",
        "pg_cancel_backend pg_terminate_backend pg_reload_conf pg_rotate_logfile* pg_promote pg_switch_wal "
        "pg_wal_replay_* pg_log_backend_memory_contexts pg_backup_* pg_start_backup pg_stop_backup "
        "pg_create_restore_point",
    ),
    family("sleeping", "never", "sleeps or waits", "pg_sleep*"),
    family("locks", "never", "takes or releases a lock", "pg_advisory* pg_try_advisory*"),
    family(
        "files and large objects",
        "never",
        "reads or lists server files, or creates large objects",
        "pg_read_file* pg_read_binary_file pg_ls_* pg_stat_file pg_file_* lo_* loread lowrite "
        "pg_current_logfile pg_hba_file_rules pg_ident_file_mappings pg_show_all_file_settings pg_config "
        "pg_control_*",
    ),
    family(
        "writes and session state",
        "never",
        "writes (sequences, statistics, WAL, replication, notifications, indexes) or changes a setting",
        "nextval setval set_config setseed set_limit pg_stat_reset* pg_stat_statements_reset "
        "pg_stat_force_next_flush pg_logical_emit_message pg_logical_slot_* pg_replication_* "
        "pg_create_*_replication_slot pg_drop_replication_slot pg_copy_*_replication_slot "
        "pg_replication_slot_advance pg_export_snapshot pg_notify brin_summarize* brin_desummarize_range "
        "gin_clean_pending_list pg_truncate_visibility_map pg_prewarm pg_import_system_collations "
        "pg_nextoid binary_upgrade_* pg_stop_making_pinned_objects pg_extension_config_dump",
    ),
)

_ALLOWED = (
    family(
        "SQL syntax",
        "allowed",
        "syntax the parser models as a function call",
        "coalesce nullif greatest least cast try_cast extract exists row array collate interval "
        "current_date current_time current_timestamp localtime localtimestamp current_user current_role "
        "current_catalog session_user user position substring trim overlay",
        in_catalog=False,
    ),
    family(
        "aggregates",
        "allowed",
        "aggregates, statistics and ordered-set aggregates",
        "count sum avg min max array_agg string_agg bool_and bool_or every bit_and bit_or bit_xor "
        "json_agg jsonb_agg json_object_agg jsonb_object_agg xmlagg range_agg range_intersect_agg "
        "stddev stddev_pop stddev_samp variance var_pop var_samp corr covar_pop covar_samp regr_avgx "
        "regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy "
        "mode percentile_cont percentile_disc",
    ),
    family(
        "window",
        "allowed",
        "window and hypothetical-set functions",
        "row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value",
    ),
    family(
        "math",
        "allowed",
        "arithmetic, rounding, trigonometry; random numbers (volatile, but they change nothing)",
        "abs cbrt ceil ceiling degrees div exp factorial floor gcd lcm ln log log10 min_scale mod pi power "
        "pow radians round scale sign sqrt trim_scale trunc width_bucket random acos acosd acosh asin asind "
        "asinh atan atan2 atan2d atand atanh cos cosd cosh cot cotd sin sind sinh tan tand tanh",
    ),
    family(
        "strings",
        "allowed",
        "string and binary-string functions, hashes, formatting",
        "ascii bit_length btrim char_length character_length chr concat concat_ws convert convert_from "
        "convert_to decode encode format initcap left length lower lpad ltrim md5 normalize is_normalized "
        "octet_length parse_ident quote_ident quote_literal quote_nullable repeat replace reverse right rpad "
        "rtrim split_part starts_with strpos substr to_ascii to_hex translate unistr upper sha224 sha256 "
        "sha384 sha512 get_bit get_byte set_bit set_byte bit_count string_to_array string_to_table "
        "to_char to_number",
    ),
    family(
        "regular expressions",
        "allowed",
        "POSIX regular expressions",
        "regexp_count regexp_instr regexp_like regexp_match regexp_matches regexp_replace "
        "regexp_split_to_array regexp_split_to_table regexp_substr",
    ),
    family(
        "date and time",
        "allowed",
        "dates, times, intervals, time zones; the clock (stable or harmlessly volatile)",
        "age clock_timestamp date_bin date_part date_trunc isfinite justify_days justify_hours "
        "justify_interval make_date make_interval make_time make_timestamp make_timestamptz now "
        "statement_timestamp timeofday transaction_timestamp to_date to_timestamp timezone overlaps",
    ),
    family(
        "type constructors",
        "allowed",
        "functional casts named after a type (int4(x), date(x), ...)",
        "bool int2 int4 int8 float4 float8 numeric text varchar bpchar char name date time timetz "
        "timestamp timestamptz interval money bit varbit cidr macaddr macaddr8 xml",
    ),
    family(
        "arrays",
        "allowed",
        "array functions, including the set-returning ones",
        "array_append array_cat array_dims array_fill array_length array_lower array_ndims array_position "
        "array_positions array_prepend array_remove array_replace array_to_string array_upper cardinality "
        "trim_array unnest generate_subscripts",
    ),
    family(
        "JSON",
        "allowed",
        "JSON and JSONB construction, extraction, SQL/JSON path",
        "array_to_json row_to_json to_json to_jsonb json_build_array json_build_object json_object "
        "jsonb_build_array jsonb_build_object jsonb_object json_array_elements json_array_elements_text "
        "jsonb_array_elements jsonb_array_elements_text json_array_length jsonb_array_length json_each "
        "json_each_text jsonb_each jsonb_each_text json_extract_path json_extract_path_text "
        "jsonb_extract_path jsonb_extract_path_text json_object_keys jsonb_object_keys json_populate_record "
        "json_populate_recordset jsonb_populate_record jsonb_populate_recordset json_to_record "
        "json_to_recordset jsonb_to_record jsonb_to_recordset json_strip_nulls jsonb_strip_nulls "
        "json_typeof jsonb_typeof jsonb_insert jsonb_set jsonb_set_lax jsonb_pretty jsonb_path_exists "
        "jsonb_path_exists_tz jsonb_path_match jsonb_path_match_tz jsonb_path_query jsonb_path_query_tz "
        "jsonb_path_query_array jsonb_path_query_array_tz jsonb_path_query_first jsonb_path_query_first_tz",
    ),
    family(
        "full-text search",
        "allowed",
        "text search vectors, queries, ranking, headlines, parser and dictionary reads",
        "to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank ts_rank_cd "
        "ts_headline setweight strip numnode querytree ts_delete ts_filter tsvector_to_array "
        "array_to_tsvector json_to_tsvector jsonb_to_tsvector get_current_ts_config ts_lexize ts_parse "
        "ts_token_type ts_debug tsquery_phrase",
    ),
    family(
        "XML",
        "allowed",
        "XML well-formedness checks and comments",
        "xml_is_well_formed xml_is_well_formed_content xml_is_well_formed_document xmlcomment",
    ),
    family(
        "ranges, geometry, network, enums",
        "allowed",
        "range, multirange, geometric, network-address and enum functions",
        "lower_inc upper_inc lower_inf upper_inf isempty range_merge multirange int4range int8range numrange "
        "tsrange tstzrange daterange int4multirange int8multirange nummultirange tsmultirange tstzmultirange "
        "datemultirange area center diameter height width npoints isclosed isopen popen pclose radius slope "
        "bound_box diagonal ishorizontal isvertical isparallel isperp point box circle lseg line path "
        "polygon abbrev broadcast family host hostmask masklen netmask network set_masklen inet_merge "
        "inet_same_family macaddr8_set7bit enum_first enum_last enum_range",
    ),
    family(
        "series, UUIDs and small helpers",
        "allowed",
        "row generators, UUID generation, null counting, type names, size formatting",
        "generate_series gen_random_uuid num_nonnulls num_nulls pg_typeof pg_size_pretty pg_size_bytes "
        "current_database current_schema",
    ),
    family(
        "sizes",
        "allowed",
        "how big a table, its indexes or the database are (they only read; refused while columns are masked)",
        "pg_relation_size pg_table_size pg_indexes_size pg_total_relation_size pg_database_size",
    ),
)

_EXTENSIONS = (
    family(
        "contrib extensions",
        "allowed",
        "pgcrypto hashes and UUIDs, pg_trgm similarity, fuzzystrmatch, uuid-ossp name-based and random "
        "UUIDs, hstore, citext, intarray, cube, earthdistance, tablefunc's normal_rand",
        "digest hmac gen_random_bytes crypt gen_salt similarity word_similarity strict_word_similarity "
        "show_trgm show_limit levenshtein levenshtein_less_equal soundex difference metaphone dmetaphone "
        "dmetaphone_alt text_soundex uuid_generate_v3 uuid_generate_v4 uuid_generate_v5 uuid_nil "
        "uuid_ns_dns uuid_ns_oid uuid_ns_url uuid_ns_x500 akeys avals skeys svals each exist defined "
        "fetchval hstore hstore_to_json hstore_to_jsonb hstore_to_json_loose hstore_to_jsonb_loose "
        "hstore_to_array hstore_to_matrix slice slice_array exists_any exists_all isexists isdefined "
        "delete populate_record tconvert citext icount idx sort sort_asc sort_desc uniq subarray intset "
        "cube cube_dim cube_distance cube_ll_coord cube_ur_coord cube_coord cube_coord_llur cube_inter "
        "cube_union cube_contains cube_contained cube_overlap cube_size cube_subset cube_is_point "
        "cube_enlarge distance_chebyshev distance_taxicab earth earth_box earth_distance gc_to_sec "
        "sec_to_gc geo_distance latitude longitude ll_to_earth normal_rand",
        in_catalog=False,
    ),
    family(
        "pgvector",
        "allowed",
        "vector distances and helpers (not installed on the test server: names from pgvector's docs)",
        "l2_distance cosine_distance inner_product l1_distance hamming_distance jaccard_distance "
        "vector_dims vector_norm l2_normalize binary_quantize subvector",
        in_catalog=False,
    ),
)

_ABSENT = (
    family(
        "XPath",
        "absent",
        "XPath over an XML value: libxml2 checks no cancel, and `//a[. = //a]` costs nodes^2 (30,000 "
        "nodes ran 26 s past the call's timeout)",
        "xpath xpath_exists xmlexists",
    ),
    family(
        "catalog and privilege introspection",
        "absent",
        "reads the system catalogs; list_tables and describe_table answer these questions",
        "pg_get_* pg_describe_object pg_identify_object* pg_*_is_visible has_*_privilege pg_has_role "
        "obj_description col_description shobj_description format_type to_reg* pg_index_* "
        "pg_indexam_* pg_column_is_updatable pg_relation_is_updatable pg_relation_is_publishable "
        "pg_partition_* pg_filenode_relation pg_relation_filenode pg_relation_filepath "
        "pg_tablespace_location pg_tablespace_databases pg_options_to_table pg_collation_* "
        "pg_database_collation_actual_version pg_conversion_is_visible pg_encoding_* pg_char_to_encoding "
        "pg_client_encoding getdatabaseencoding pg_available_extension* pg_extension_update_paths "
        "pg_event_trigger_* pg_settings_get_flags pg_show_all_settings pg_timezone_* pg_get_keywords "
        "pg_mcv_list_items pg_column_compression oidvectortypes pg_trigger_depth row_security_active "
        "pg_sequence_parameters pg_sequence_last_value acldefault aclexplode aclcontains aclinsert "
        "aclremove makeaclitem pg_my_temp_schema pg_is_other_temp_schema current_schemas "
        "amvalidate satisfies_hash_partition",
    ),
    family(
        "server and session state",
        "absent",
        "reports on this server or session (versions, addresses, sizes, WAL)",
        "version current_setting current_query pg_backend_pid pg_postmaster_start_time pg_conf_load_time "
        "inet_client_addr inet_client_port inet_server_addr inet_server_port pg_jit_available "
        "pg_is_in_recovery pg_is_wal_replay_paused pg_get_wal_replay_pause_state pg_last_* pg_current_wal_* "
        "pg_wal_lsn_diff pg_walfile_name* pg_lsn pg_stat_clear_snapshot "
        "pg_tablespace_size pg_column_size pg_listening_channels pg_notification_queue_usage "
        "pg_cursor pg_prepared_statement pg_get_backend_memory_contexts pg_get_shmem_allocations "
        "pg_get_wal_resource_managers pg_show_replication_origin_status getpgusername "
        "txid_current_if_assigned pg_current_xact_id_if_assigned txid_current_snapshot "
        "pg_current_snapshot txid_snapshot_* pg_snapshot_* txid_status pg_xact_status "
        "txid_visible_in_snapshot pg_visible_in_snapshot pg_xact_commit_timestamp* pg_last_committed_xact "
        "mxid_age currval lastval pg_get_multixact_members pg_indexam_progress_phasename",
    ),
    family(
        "operator, index and type internals",
        "absent",
        "support functions behind operators, indexes, hashing and binary I/O; write the operator instead",
        "*send *cmp *_cmp *_cmp_* bt*image xmlconcat2 hash* *_hash *_hash_extended bt*cmp *larger "
        "*smaller *_accum *_accum_inv "
        "*_combine *_avg *_sum *_statefunc *_transfn int8inc* int8dec* int4inc numeric_* float8_* "
        "*typmodin in_range *_canonical *_subdiff gin_* spg_* brin_*_send like_escape similar_escape "
        "similar_to_escape textlen nameconcatoid int2vectorsend oid regclass xid currtid2 "
        "cash_words dexp dlog1 dlog10 dround dtrunc interval_avg array_larger array_smaller "
        "text_larger text_smaller fmgr_* plpgsql_* postgresql_fdw_validator tsquery_cmp "
        "multirange_intersect_agg_transfn range_intersect_agg_transfn unknownsend",
    ),
    family(
        "rarely useful or superseded",
        "absent",
        "no analytical use, or better written another way",
        "like notlike xmlvalidate uuid_generate_v1 uuid_generate_v1mc xpath_bool xpath_list "
        "xpath_nodeset xpath_number xpath_string xml_valid xml_encode_special_chars armor dearmor "
        "encrypt encrypt_iv decrypt decrypt_iv pgp_* hstore_version_diag querytree boolop rboolop "
        "intarray_* intset_* _int_* citext_* texticlike texticnlike texticregexeq texticregexne "
        "cube_cmp cube_eq cube_ne cube_lt cube_le cube_gt cube_ge hs_* hstore_* similarity_* "
        "*similarity_op *similarity_commutator_op *_dist_op *_dist_commutator_op similarity_dist",
    ),
)

POSTGRES: Final = FunctionTable("postgres", _NEVER + _ALLOWED + _EXTENSIONS + _ABSENT + PG16)

COLLECTING_AGGREGATES: Final = frozenset(
    [
        *("string_agg", "array_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg"),
        *("xmlagg", "range_agg", "json_agg_strict", "jsonb_agg_strict", "json_object_agg_strict"),
        *("jsonb_object_agg_strict", "json_object_agg_unique", "jsonb_object_agg_unique"),
        *(
            "json_object_agg_unique_strict",
            "jsonb_object_agg_unique_strict",
            "json_arrayagg",
            "json_objectagg",
        ),
    ]
)
"""Aggregates that keep every value of their group in the backend, past work_mem and unspilled
(`admission.limit_aggregates`); PostgreSQL 16's names included."""
