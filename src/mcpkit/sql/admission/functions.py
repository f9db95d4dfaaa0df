"""Function names as the database will see them, and the per-dialect denylists.

A denylist entry is a lower-case name, or a prefix ending in `*`. Names are matched without
their schema qualifier, so `pg_catalog.pg_sleep` and `"pg_sleep"` both hit `pg_sleep`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Final

from sqlglot import exp

__all__ = [
    "DENYLISTS",
    "SYNTAX_FUNCTIONS",
    "FunctionCall",
    "FunctionPolicy",
    "function_calls",
    "load_allowlist",
    "matches",
]

_POSTGRES: Final = frozenset(
    {
        # sleeping, locks, backend and server control
        "pg_sleep*",
        "pg_advisory*",
        "pg_try_advisory*",
        "pg_cancel_backend",
        "pg_terminate_backend",
        "pg_reload_conf",
        "pg_rotate_logfile*",
        "pg_promote",
        "pg_switch_wal",
        "pg_create_restore_point",
        "pg_backup_*",
        "pg_start_backup",
        "pg_stop_backup",
        "pg_wal_replay_*",
        "pg_log_backend_memory_contexts",
        "pg_import_system_collations",
        "pg_nextoid",
        "binary_upgrade_*",
        # server files and large objects
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_*",
        "pg_stat_file",
        "pg_file_*",
        "lo_*",
        "loread",
        "lowrite",
        # settings, sequences, statistics, messages, replication
        "set_config",
        "setseed",
        "nextval",
        "setval",
        "pg_stat_reset*",
        "pg_stat_statements_reset",
        "pg_logical_emit_message",
        "pg_logical_slot_*",
        "pg_replication_*",
        "pg_create_*",
        "pg_drop_replication_slot",
        "pg_copy_*_replication_slot",
        "pg_export_snapshot",
        "pg_notify",
        "brin_summarize*",
        "brin_desummarize_range",
        "gin_clean_pending_list",
        "pg_truncate_visibility_map",
        "pg_prewarm",
        # SQL in strings and remote servers
        "query_to_xml*",
        "cursor_to_xml*",
        "table_to_xml*",
        "schema_to_xml*",
        "database_to_xml*",
        "ts_stat",
        "ts_rewrite",
        "dblink*",
        "postgres_fdw_*",
    }
)

_MYSQL: Final = frozenset(
    {
        "sleep",
        "benchmark",
        "get_lock",
        "release_lock",
        "release_all_locks",
        "is_used_lock",
        "is_free_lock",
        "load_file",
        "master_pos_wait",
        "source_pos_wait",
        "master_gtid_wait",
        "wait_for_executed_gtid_set",
        "wait_until_sql_thread_after_gtids",
        "last_insert_id",
        "nextval",
        "setval",
        "lastval",
        "sys_exec",
        "sys_eval",
        "sys_get",
        "sys_set",
        "lib_mysqludf_*",
    }
)

_SQLITE: Final = frozenset(
    {
        "load_extension",
        "readfile",
        "writefile",
        "edit",
        "fts3_tokenizer",
        "fsdir",
        "lsdir",
        "zipfile*",
        "sqlar_*",
        "shell_*",
        "sqlite_dbdata",
        "sqlite_dbptr",
    }
)

DENYLISTS: Final[dict[str, frozenset[str]]] = {
    "postgres": _POSTGRES,
    "mysql": _MYSQL,
    "sqlite": _SQLITE,
}

# SQL syntax sqlglot models as functions; an operator allowlist never has to list these.
SYNTAX_FUNCTIONS: Final = frozenset(
    {
        "cast",
        "try_cast",
        "extract",
        "exists",
        "array",
        "row",
        "case",
        "position",
        "substring",
        "trim",
        "overlay",
        "collate",
        "current_date",
        "current_time",
        "current_timestamp",
        "localtime",
        "localtimestamp",
        "current_user",
        "session_user",
        "user",
        "interval",
    }
)


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a lower-case function name is in a list of names and `prefix*` patterns.

    >>> matches("pg_sleep_for", ["pg_sleep*"])
    True
    >>> matches("lower", ["lo_*"])
    False
    """
    return any(fnmatchcase(name, p) if p.endswith("*") else name == p for p in patterns)


@dataclass(frozen=True)
class FunctionCall:
    """One function call in a tree.

    `name` is the name the database will see (the generated one when known); `names` adds every
    alias sqlglot knows for the same function, so a denylist entry for any of them hits.
    `is_call` is false for syntax sqlglot models as a function (`x ->> 'a'`, `CASE`,
    `CURRENT_DATE`): it is written without `name(...)`.
    """

    name: str
    names: frozenset[str]
    schema: str | None
    node: exp.Func
    is_call: bool
    db_name: str
    db_schema: str | None


@dataclass(frozen=True)
class FunctionPolicy:
    """Which functions admission lets through.

    Args:
        deny: Names and `prefix*` patterns always refused (the dialect's denylist by default).
        allow: When set, only these names (plus SQL syntax such as CAST) are admitted.
    """

    deny: frozenset[str]
    allow: frozenset[str] | None = None

    @classmethod
    def for_dialect(cls, dialect: str, allow: Iterable[str] | None = None) -> FunctionPolicy:
        """The default policy of a dialect, optionally in allowlist mode."""
        deny = DENYLISTS.get(dialect, frozenset().union(*DENYLISTS.values()))
        return cls(deny=deny, allow=None if allow is None else frozenset(n.lower() for n in allow))


def load_allowlist(path: str | Path) -> frozenset[str]:
    """Read an operator allowlist: one function name a line, `#` starts a comment.

    Args:
        path: The file.

    Returns:
        The lower-case names.
    """
    names = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        name = line.split("#", 1)[0].strip().lower()
        if name:
            names.add(name)
    return frozenset(names)


def _generated_name(node: exp.Func, dialect: str) -> str | None:
    # The name the generator writes before "(" for this node, when it is a plain identifier.
    # This reads our own generated SQL, never the user's text.
    text = node.sql(dialect=dialect, normalize_functions=False, comments=False)
    head, paren, _ = text.partition("(")
    head = head.strip().strip('"`')
    if paren and head and all(c.isalnum() or c in "_$" for c in head):
        return head.lower()
    return None


def _db_identifier(node: exp.Expr) -> str:
    # How the database resolves a name: quoted names keep their case, unquoted ones fold.
    if isinstance(node, exp.Identifier):
        return node.name if node.quoted else node.name.lower()
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return _db_identifier(node.this)
    return node.sql().lower()


def _qualifier(node: exp.Expr) -> str | None:
    parts: list[str] = []
    child, parent = node, node.parent
    while isinstance(parent, exp.Dot) and parent.expression is child:
        parts.insert(0, _db_identifier(parent.this))
        child, parent = parent, parent.parent
    return ".".join(parts) or None


def function_calls(tree: exp.Expr, dialect: str) -> Iterator[FunctionCall]:
    """Every function call in `tree`, with all the names it may go by.

    Args:
        tree: A parsed statement.
        dialect: The sqlglot dialect the SQL will be generated in.

    Yields:
        One `FunctionCall` per `exp.Func` node (select list, FROM, WHERE, anywhere).
    """
    for node in tree.find_all(exp.Func):
        db_name: str | None = None
        if isinstance(node, exp.Anonymous):
            this = node.this
            written = (this.name if isinstance(this, exp.Identifier) else str(this)).lower()
            db_name = _db_identifier(this) if isinstance(this, exp.Identifier) else written
            names = {written}
        else:
            written = node.sql_name().lower()
            names = {written, *(n.lower() for n in getattr(type(node), "_sql_names", ()))}
        generated = _generated_name(node, dialect)
        if generated:
            names.add(generated)
        anonymous = isinstance(node, exp.Anonymous)
        name = written if anonymous else (generated or written)
        schema = _qualifier(node)
        yield FunctionCall(
            name=name,
            names=frozenset(names),
            schema=schema.lower() if schema else None,
            node=node,
            is_call=anonymous or generated is not None,
            db_name=db_name or name,
            db_schema=schema,
        )
