"""SQLite 3: the reviewed function table (candidates: `pragma_function_list` of the SQLite Python links,
3.40 here, with FTS3/4/5, R*Tree, JSON and math functions compiled in).

SQLite also calls functions for operators (`LIKE` calls like(), `GLOB` glob(), `MATCH` match(),
`->` and `->>`), so those are listed for an engine-level check (the authorizer) to consult.
Table-valued calls in FROM (`json_each(...)`, `pragma_table_info(...)`, an FTS5 table called with
its query) reach virtual tables, never SQL functions; admission checks them against the never list
only, and the authorizer decides what they may read.
"""

from __future__ import annotations

from typing import Final

from mcpkit.sql.admission.function_tables import FunctionTable, RelationRule, family, relation_rule

__all__ = ["NEVER_RELATIONS", "SQLITE"]

_PATH: Final = "shows the database file's path on the server"
# The bare table form; the call form `pragma_database_list()` is the never family below.
_COMMITS: Final = "counts other connections' commits to the database file"
NEVER_RELATIONS: Final[tuple[RelationRule, ...]] = (
    relation_rule(None, _PATH, "pragma_database_list"),
    relation_rule(None, _COMMITS, "pragma_data_version"),
)

_NEVER = (
    family("server paths", "never", _PATH, "pragma_database_list", in_catalog=False),
    family("other connections' commits", "never", _COMMITS, "pragma_data_version", in_catalog=False),
    family(
        "extensions and files",
        "never",
        "loads native code, reads or writes files, or hands out raw pointers",
        "load_extension readfile writefile edit fts3_tokenizer fsdir lsdir zipfile* sqlar_* shell_* "
        "sqlite_dbdata sqlite_dbptr",
    ),
    family("writes to the log", "never", "writes to the error log", "sqlite_log"),
    family(
        "FTS3/4 offsets",
        "never",
        "lists every match of every phrase in one engine step, which no deadline stops (rtC F6b)",
        "offsets",
    ),
)

_ALLOWED = (
    family(
        "SQL syntax and operators",
        "allowed",
        "syntax the parser models as a function call, and the functions SQLite calls for operators",
        "cast extract exists row case collate interval current_date current_time current_timestamp "
        "like glob match -> ->> regexp",
        in_catalog=False,
    ),
    family(
        "aggregates",
        "allowed",
        "aggregates",
        "count sum total avg min max group_concat json_group_array json_group_object",
    ),
    family(
        "window",
        "allowed",
        "window functions",
        "row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value",
    ),
    family(
        "math",
        "allowed",
        "arithmetic, rounding, trigonometry (math functions compiled in); random numbers change nothing",
        "abs acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 "
        "log2 mod pi pow power radians round sign sin sinh sqrt tan tanh trunc random randomblob",
    ),
    family(
        "strings",
        "allowed",
        "string functions and formatting",
        "char coalesce format hex ifnull iif instr length lower ltrim nullif printf quote replace rtrim "
        "soundex substr substring trim typeof unicode upper",
    ),
    family(
        "date and time",
        "allowed",
        "dates and times",
        "date time datetime julianday strftime unixepoch",
    ),
    family(
        "JSON",
        "allowed",
        "JSON construction and extraction (json_each and json_tree are table-valued)",
        "json json_array json_array_length json_extract json_insert json_object json_quote "
        "json_remove json_replace json_set json_type json_valid",
    ),
    family(
        "JSON tables",
        "allowed",
        "json_each and json_tree, table-valued (virtual tables, so not in pragma_function_list)",
        "json_each json_tree",
        in_catalog=False,
    ),
    family(
        "full-text search",
        "allowed",
        "FTS5 ranking and highlighting, FTS3/4 match information (snippet() not where an FTS3/4 table is)",
        "bm25 highlight snippet matchinfo",
    ),
    family(
        "sqlite-vec",
        "allowed",
        "vector distances and lengths, pure (loaded only with --similar; the wheel's extension)",
        "vec_distance_cosine vec_distance_l2 vec_distance_l1 vec_length vec_f32",
        in_catalog=False,
    ),
    family(
        "planner hints",
        "allowed",
        "hints that change no result",
        "likelihood likely unlikely",
    ),
)

_ABSENT = (
    family(
        "library and session state",
        "absent",
        "reports on the library build or the connection (no analytical use)",
        "sqlite_version sqlite_source_id sqlite_compileoption_get sqlite_compileoption_used changes "
        "total_changes last_insert_rowid fts5_source_id",
    ),
    family(
        "JSON merge patch",
        "absent",
        "compares every key of the patch with every key of the target in one step, where no deadline "
        "is checked (two 40,000-key objects: minutes)",
        "json_patch",
    ),
    family(
        "internals",
        "absent",
        "debugging and internal helpers of FTS and R*Tree, subtypes, zero-filled blobs",
        "fts5 optimize rtreecheck rtreedepth rtreenode subtype zeroblob",
    ),
)

SQLITE: Final = FunctionTable("sqlite", _NEVER + _ALLOWED + _ABSENT)
