"""Reflection through SQLAlchemy's inspector: what the account can read, and what a table looks like."""

from __future__ import annotations

import logging
from typing import Any, Final

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.engine.reflection import Inspector
from sqlalchemy.exc import DBAPIError

from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import refuse
from mcpkit.sql.models import (
    ColumnEntry,
    ForeignKeyEntry,
    IndexEntry,
    TableDescription,
    TableEntry,
    TableList,
)
from mcpkit.sql.profiles import Profile

__all__ = ["MAX_TABLES", "describe_table", "list_tables"]

log = logging.getLogger("mcpkit.sql")

MAX_TABLES: Final = 500
_SYSTEM_SCHEMAS: Final = frozenset(
    {"information_schema", "pg_catalog", "pg_toast", "mysql", "performance_schema", "sys"}
)
_GRANTED: Final = text(
    "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, COLUMN_DEFAULT, COLUMN_COMMENT"
    " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(:schema, DATABASE())"
    " AND TABLE_NAME = :table ORDER BY ORDINAL_POSITION"
)
_NOT_FOUND: Final = "No readable table or view has that name; call list_tables to see the names."


def _schemas(insp: Inspector) -> list[str | None]:
    names = [s for s in insp.get_schema_names() if s not in _SYSTEM_SCHEMAS and not s.startswith("pg_")]
    return list(names) or [None]


def _entries(
    insp: Inspector, conn: Connection, profile: Profile, only: str | None = None
) -> list[TableEntry]:
    readable = profile.readable(conn)
    out: list[TableEntry] = []
    for schema in [only] if only else _schemas(insp):
        for kind, names in (("table", insp.get_table_names(schema)), ("view", insp.get_view_names(schema))):
            for name in names:
                key = (schema, name)
                if readable is not None and key not in readable:
                    continue
                estimate = readable.get(key) if readable is not None else None
                shown, note = (None, estimate) if isinstance(estimate, str) else (estimate, None)
                out.append(
                    TableEntry(
                        table_schema=schema, name=name, kind=kind, row_estimate=shown, row_estimate_note=note
                    )
                )
    return out


def list_tables(
    engine: SqlEngine, *, call_id: str, timeout_s: float = 30.0, schema: str | None = None
) -> TableList:
    """Tables and views the account can read, with the database's row estimates where it has them.

    Args:
        engine: The engine.
        call_id: For the database's session identity and the log.
        timeout_s: Deadline for the catalog queries.
        schema: Only this schema.

    Returns:
        At most `MAX_TABLES` entries, `truncated` when there were more.
    """
    with engine.session(timeout_s, call_id) as (conn, _):
        entries = _entries(inspect(conn), conn, engine.profile, schema)
    entries.sort(key=lambda e: (e.table_schema or "", e.name))
    return TableList(tables=entries[:MAX_TABLES], truncated=len(entries) > MAX_TABLES)


def _locate(entries: list[TableEntry], name: str, schema: str | None) -> TableEntry | None:
    candidates = [(schema, name)]
    if schema is None and "." in name:
        left, right = name.split(".", 1)
        candidates.append((left, right))
    for want_schema, want_name in candidates:
        for folded in (False, True):
            for e in entries:
                same = e.name.lower() == want_name.lower() if folded else e.name == want_name
                if same and (want_schema is None or e.table_schema == want_schema):
                    return e
    return None


def _safe(call: Any, default: Any) -> Any:
    try:
        return call()
    except NotImplementedError:
        return default


def describe_table(
    engine: SqlEngine, name: str, *, call_id: str, schema: str | None = None, timeout_s: float = 30.0
) -> TableDescription:
    """Columns, types, nullability, keys, indexes and comments of one readable table or view.

    The name is matched against the readable tables first, so nothing the model wrote reaches
    a catalog query (SQLite's PRAGMA table_info takes an identifier, not a parameter).

    Args:
        engine: The engine.
        name: Table or view name, optionally `schema.name`.
        call_id: For the database's session identity and the log.
        schema: The schema, when not part of `name`.
        timeout_s: Deadline for the catalog queries.

    Returns:
        The description.

    Raises:
        Refused: no readable table or view has that name (reason `not_found`).
    """
    with engine.session(timeout_s, call_id) as (conn, _):
        insp = inspect(conn)
        entry = _locate(_entries(insp, conn, engine.profile), name, schema)
        if entry is None:
            refuse("not_found", _NOT_FOUND)
        s, n = entry.table_schema, entry.name
        try:
            pk = _safe(lambda: insp.get_pk_constraint(n, s), {}) or {}
        except DBAPIError:
            if conn.dialect.name not in ("mysql", "mariadb"):
                raise
            # MariaDB refuses SHOW CREATE TABLE (the inspector's source) to a login that holds only
            # column privileges, as `--mask` requires: information_schema lists what it may read.
            return _granted(conn, entry)
        pk_cols = list(pk.get("constrained_columns") or [])
        columns = [
            ColumnEntry(
                name=c["name"],
                type=_type_name(c["type"], conn),
                nullable=bool(c.get("nullable", True)),
                default=None if c.get("default") is None else str(c.get("default")),
                primary_key=c["name"] in pk_cols,
                comment=c.get("comment"),
            )
            for c in insp.get_columns(n, s)
        ]
        fks = [
            ForeignKeyEntry(
                columns=list(fk.get("constrained_columns") or []),
                references_schema=fk.get("referred_schema"),
                references_table=str(fk.get("referred_table")),
                references_columns=list(fk.get("referred_columns") or []),
            )
            for fk in _safe(lambda: insp.get_foreign_keys(n, s), [])
        ]
        indexes = [
            IndexEntry(
                name=ix.get("name"), columns=list(ix.get("column_names") or []), unique=bool(ix.get("unique"))
            )
            for ix in _safe(lambda: insp.get_indexes(n, s), [])
        ]
        comment = (_safe(lambda: insp.get_table_comment(n, s), {}) or {}).get("text")
    return TableDescription(
        table_schema=s,
        name=n,
        kind=entry.kind,
        comment=comment,
        row_estimate=entry.row_estimate,
        row_estimate_note=entry.row_estimate_note,
        columns=columns,
        primary_key=pk_cols,
        foreign_keys=fks,
        indexes=indexes,
    )


def _granted(conn: Connection, entry: TableEntry) -> TableDescription:
    rows = conn.execute(_GRANTED, {"schema": entry.table_schema, "table": entry.name}).all()
    columns = [
        ColumnEntry(
            name=str(name),
            type=str(type_).upper(),
            nullable=nullable == "YES",
            default=None if default is None else str(default),
            primary_key=key == "PRI",
            comment=comment or None,
        )
        for name, type_, nullable, key, default, comment in rows
    ]
    return TableDescription(
        table_schema=entry.table_schema,
        name=entry.name,
        kind=entry.kind,
        row_estimate=entry.row_estimate,
        row_estimate_note=entry.row_estimate_note,
        columns=columns,
        primary_key=[c.name for c in columns if c.primary_key],
    )


def _type_name(sa_type: Any, conn: Connection) -> str:
    try:
        return str(sa_type.compile(dialect=conn.dialect))
    except Exception:
        return type(sa_type).__name__
