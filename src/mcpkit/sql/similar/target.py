"""Which table and embedding column a similar_rows call ranks, found by reflection and the catalog."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, StrictInt, field_validator, model_validator
from sqlalchemy import text
from sqlglot import exp

from mcpkit.errors import Refused, ToolError
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.models import ColumnEntry, TableDescription
from mcpkit.sql.reflect import describe_table
from mcpkit.sql.service import SqlService

if TYPE_CHECKING:
    pass

log = logging.getLogger("mcpkit.sql")

MAX_K: Final = 100
MAX_DIM: Final = 16_000  # pgvector's limit for `vector`
Metric = Literal["cosine", "l2"]
Kind = Literal["sqlite_vec", "pgvector", "array", "json"]

_ARRAY_ELEMENTS: Final = frozenset({"float4", "float8", "numeric", "int2", "int4", "int8"})
_PG_VECTORS: Final = frozenset({"vector", "halfvec"})
_MYSQL_TEXTS: Final = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"})
_MYSQL_COLUMNS: Final = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, PRIVILEGES, COLUMN_KEY "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(:schema, DATABASE()) "
    "AND TABLE_NAME = :table ORDER BY ORDINAL_POSITION"
)
_PG_COLUMNS: Final = (
    "SELECT a.attname, t.typname, e.typname, a.atttypmod, "
    "has_column_privilege(a.attrelid, a.attnum, 'SELECT'), t.typnamespace::regnamespace::text "
    "FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
    "LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem AND t.typcategory = 'A' "
    "WHERE a.attrelid = CAST(:rel AS regclass) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)
_NO_TABLE: Final = "No readable table or view has that name; call list_tables to see the names."
_NO_COLUMN: Final = "That table has no column of that name; call describe_table to see its columns."
_NOT_VECTOR: Final = (
    "That column does not hold embeddings this database can compare: use a pgvector vector or a "
    "float array column (PostgreSQL), a JSON array or float32 blob column (SQLite), or a JSON array "
    "text column (MySQL/MariaDB)."
)
_UNREADABLE: Final = "This server's database account may not read that column."
_MASKED: Final = "That column is masked on this server; it cannot be used for similarity."
NO_KEY: Final = (
    "That table has no single-column primary key to find the row by; pass a vector instead of row_id."
)


class SimilarRowsInput(BaseModel):
    """Arguments of similar_rows."""

    model_config = ConfigDict(extra="forbid")

    table: str = Field(min_length=1, max_length=512, description="Table, as list_tables shows it.")
    column: str = Field(min_length=1, max_length=256, description="Its embedding column.")
    # One JSON type (some clients reject `anyOf`); the database converts the text to the key's type.
    row_id: str | None = Field(
        default=None, min_length=1, max_length=256, description="Primary key of the row to compare with."
    )
    vector: list[FiniteFloat] | None = Field(
        default=None, min_length=1, max_length=MAX_DIM, description="Or a vector to compare with."
    )
    k: StrictInt = Field(default=10, ge=1, le=MAX_K, description=f"Rows to return (at most {MAX_K}).")
    metric: Metric = Field(default="cosine", description="cosine or l2 distance.")
    table_schema: str = Field(default="", max_length=256, description="Its schema, when names repeat.")

    @field_validator("row_id", mode="before")
    @classmethod
    def _key_as_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _one_reference(self) -> SimilarRowsInput:
        if (self.row_id is None) == (self.vector is None):
            raise ValueError("give exactly one of row_id and vector")
        return self


@dataclass(frozen=True)
class Target:
    """The reflected table and embedding column a call ranks."""

    table: TableDescription
    column: str
    key: str | None
    kind: Kind
    type_name: str  # pgvector: its schema-qualified, quoted type (vector or halfvec)
    dims: int | None  # declared dimension (pgvector typmod), when known
    shown: tuple[str, ...]  # the columns to return: those the identity may read


def quote_name(name: str, dialect: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


def table_sql(table: TableDescription, dialect: str) -> str:
    return exp.table_(table.name, db=table.table_schema, quoted=True).sql(dialect=dialect)


def _column(table: TableDescription, name: str) -> str:
    for folded in (False, True):
        for c in table.columns:
            if (c.name.casefold() == name.casefold()) if folded else c.name == name:
                return c.name
    raise Refused(_NO_COLUMN, data={"reason": "not_found"}, expose_data=True)


def _pg_kind(
    engine: SqlEngine, table: TableDescription, column: str, call_id: str, timeout_s: float
) -> Target:
    rel = table_sql(table, "postgres")
    with engine.session(timeout_s, call_id) as (conn, _):
        found = {str(r[0]): r for r in conn.execute(text(_PG_COLUMNS), {"rel": rel})}
    if column not in found:  # pragma: no cover - reflected a moment ago
        raise Refused(_NO_COLUMN, data={"reason": "not_found"}, expose_data=True)
    _, type_name, element, typmod, readable, namespace = found[column]
    if not readable:
        raise Refused(_UNREADABLE, data={"reason": "permission"}, expose_data=True)
    # Columns without a grant are left out, as SELECT * would fail on them.
    shown = tuple(name for name, row in found.items() if row[4])
    key = table.primary_key[0] if len(table.primary_key) == 1 else None
    if type_name in _PG_VECTORS:
        dims = int(typmod) if int(typmod) > 0 else None
        # Qualified by the extension's schema: the caller's search_path need not include it.
        qualified = f"{quote_name(str(namespace), 'postgres')}.{quote_name(str(type_name), 'postgres')}"
        return Target(table, column, key, "pgvector", qualified, dims, shown)
    if element is not None and str(element) in _ARRAY_ELEMENTS:
        return Target(table, column, key, "array", "float8", None, shown)
    raise Refused(_NOT_VECTOR, data={"reason": "not_a_vector"}, expose_data=True)


def _mysql_table(engine: SqlEngine, args: SimilarRowsInput, call_id: str, timeout_s: float) -> _Located:
    # information_schema, not SHOW CREATE TABLE (SQLAlchemy's reflection): that needs a table-level
    # privilege, and a reader granted some columns only (how masks are enforced) has none.
    candidates = [(args.table_schema or None, args.table)]
    if not args.table_schema and "." in args.table:
        left, right = args.table.split(".", 1)
        candidates.append((left, right))
    with engine.session(timeout_s, call_id) as (conn, _):
        for schema, name in candidates:
            found = conn.execute(text(_MYSQL_COLUMNS), {"schema": schema, "table": name}).all()
            if found:
                break
        else:
            raise Refused(_NO_TABLE, data={"reason": "not_found"}, expose_data=True)
    table = TableDescription(
        table_schema=str(found[0][0]),
        name=str(found[0][1]),
        kind="table",
        columns=[ColumnEntry(name=str(r[2]), type=str(r[3]), nullable=True) for r in found],
        primary_key=[str(r[2]) for r in found if r[5] == "PRI"],
    )
    readable = {str(r[2]) for r in found if "select" in str(r[4]).lower().split(",")}
    return _Located(table, {str(r[2]): str(r[3]).lower() for r in found}, readable)


@dataclass(frozen=True)
class _Located:
    """A MySQL table as information_schema shows it to the caller."""

    table: TableDescription
    types: dict[str, str]
    readable: set[str]


def _mysql_kind(located: _Located, column: str) -> Target:
    if column not in located.readable:
        raise Refused(_UNREADABLE, data={"reason": "permission"}, expose_data=True)
    if located.types[column] not in _MYSQL_TEXTS:
        raise Refused(_NOT_VECTOR, data={"reason": "not_a_vector"}, expose_data=True)
    table = located.table
    key = table.primary_key[0] if len(table.primary_key) == 1 else None
    shown = tuple(c.name for c in table.columns if c.name in located.readable)
    return Target(table, column, key, "json", "", None, shown)


def find_target(service: SqlService, args: SimilarRowsInput, call_id: str) -> Target:
    engine = service.engine
    if not isinstance(engine, SqlEngine):  # pragma: no cover - enable_similarity checked it
        raise ToolError("This server's engine cannot rank rows by similarity.")
    kind = engine.profile.vector_kind
    located = None
    if kind == "json":
        located = _mysql_table(engine, args, call_id, service.timeout_s)
        table = located.table
    else:
        table = describe_table(
            engine, args.table, call_id=call_id, schema=args.table_schema or None, timeout_s=service.timeout_s
        )
    column = _column(table, args.column)
    masking = service.masking
    if masking is not None and masking.policy.masks(table.table_schema, table.name, column):
        raise Refused(_MASKED, data={"reason": "masked_column"}, expose_data=True)
    if located is not None:
        return _mysql_kind(located, column)
    if kind == "typed":
        return _pg_kind(engine, table, column, call_id, service.timeout_s)
    key = table.primary_key[0] if len(table.primary_key) == 1 else None
    return Target(table, column, key, "sqlite_vec", "", None, tuple(c.name for c in table.columns))
