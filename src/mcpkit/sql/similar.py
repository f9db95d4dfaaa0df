"""`similar_rows`: the rows nearest to a row or a vector, ranked inside the database.

mcpkit writes one SELECT from the reflected table (identifiers quoted, the reference vector a
literal mcpkit formats from validated finite floats, never text the model wrote) and hands it to
`SqlService.query`, the path `execute_query` takes: admission with the row cap built in, masking,
the read-only session as the caller's identity (row-level security, column grants), the timeout and
the audit. The distance is computed by the engine, and the embedding column comes back as
`<VECTOR(dim)>` computed in SQL, so no vector leaves the database:

- SQLite: sqlite-vec's `vec_distance_cosine` / `vec_distance_l2` over JSON-text or float32-blob
  columns (`--similar` loads the extension the `sqlite-vec` wheel ships);
- PostgreSQL with pgvector: `cosine_distance(a, b)` and `a <-> b` over `vector`/`halfvec` columns;
- PostgreSQL without it: `real[]`/`float8[]`/`numeric[]` columns, the distance a subquery over
  `unnest` of both arrays;
- MySQL/MariaDB (no vector type in MariaDB 10.11): JSON array text columns, the distance a subquery
  joining two `JSON_TABLE`s by ordinality.

The reference vector is one string literal rather than a bind parameter so that the statement the
admission passes check, the audit records and the database runs is one and the same text (bind
parameters are refused by admission, and in-SQL cell clipping needs parameter-free SQL).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, StrictInt, field_validator, model_validator
from sqlalchemy import text
from sqlglot import exp

from mcpkit import Context, Tool, ToolAnnotations, ToolResult
from mcpkit.errors import Refused, ToolError
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.models import ColumnEntry, QueryResult, TableDescription
from mcpkit.sql.profiles.sqlite import SqliteProfile
from mcpkit.sql.reflect import describe_table
from mcpkit.sql.service import SqlService

if TYPE_CHECKING:
    from mcpkit.sql.audit import CallAudit

__all__ = [
    "MAX_DIM",
    "MAX_K",
    "SimilarRowsInput",
    "build_sql",
    "enable_similarity",
    "similar_rows",
    "similar_rows_tool",
]

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
_NO_KEY: Final = (
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
class _Target:
    """The reflected table and embedding column a call ranks."""

    table: TableDescription
    column: str
    key: str | None
    kind: Kind
    type_name: str  # pgvector: its schema-qualified, quoted type (vector or halfvec)
    dims: int | None  # declared dimension (pgvector typmod), when known
    shown: tuple[str, ...]  # the columns to return: those the identity may read


def enable_similarity(service: SqlService) -> None:
    """Prepare a service's engine for similar_rows, or refuse to start.

    SQLite: every new connection loads sqlite-vec (checked once here). PostgreSQL: nothing to load;
    pgvector columns are used where the extension is installed, float arrays everywhere.
    MySQL/MariaDB: nothing to load; JSON arrays through `JSON_TABLE`.

    Raises:
        SqlConfigError: the engine has no vector support mcpkit can use.
    """
    engine = service.engine
    if not isinstance(engine, SqlEngine):
        raise SqlConfigError("--similar needs a database engine it can reflect")
    if engine.dialect == "sqlite" and isinstance(engine.profile, SqliteProfile):
        engine.profile.use_vectors()
        rows = engine.execute(
            "SELECT vec_length('[1.0, 2.0]')", None, 1, service.timeout_s, "startup-similar"
        )
        if rows.rows != ((2,),):  # pragma: no cover - the extension answered something else
            raise SqlConfigError("--similar: sqlite-vec did not answer as expected")
    elif engine.dialect not in ("postgres", "mysql"):
        raise SqlConfigError(
            "--similar: only SQLite (sqlite-vec), PostgreSQL (pgvector or float arrays) and "
            "MySQL/MariaDB (JSON arrays) can rank rows by similarity"
        )


def _quote(name: str, dialect: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


def _table_sql(table: TableDescription, dialect: str) -> str:
    return exp.table_(table.name, db=table.table_schema, quoted=True).sql(dialect=dialect)


def _column(table: TableDescription, name: str) -> str:
    for folded in (False, True):
        for c in table.columns:
            if (c.name.casefold() == name.casefold()) if folded else c.name == name:
                return c.name
    raise Refused(_NO_COLUMN, data={"reason": "not_found"}, expose_data=True)


def _pg_kind(
    engine: SqlEngine, table: TableDescription, column: str, call_id: str, timeout_s: float
) -> _Target:
    rel = _table_sql(table, "postgres")
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
        qualified = f"{_quote(str(namespace), 'postgres')}.{_quote(str(type_name), 'postgres')}"
        return _Target(table, column, key, "pgvector", qualified, dims, shown)
    if element is not None and str(element) in _ARRAY_ELEMENTS:
        return _Target(table, column, key, "array", "float8", None, shown)
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


def _mysql_kind(located: _Located, column: str) -> _Target:
    if column not in located.readable:
        raise Refused(_UNREADABLE, data={"reason": "permission"}, expose_data=True)
    if located.types[column] not in _MYSQL_TEXTS:
        raise Refused(_NOT_VECTOR, data={"reason": "not_a_vector"}, expose_data=True)
    table = located.table
    key = table.primary_key[0] if len(table.primary_key) == 1 else None
    shown = tuple(c.name for c in table.columns if c.name in located.readable)
    return _Target(table, column, key, "json", "", None, shown)


def _target(service: SqlService, args: SimilarRowsInput, call_id: str) -> _Target:
    engine = service.engine
    if not isinstance(engine, SqlEngine):  # pragma: no cover - enable_similarity checked it
        raise ToolError("This server's engine cannot rank rows by similarity.")
    located = None
    if engine.dialect == "mysql":
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
    if engine.dialect == "postgres":
        return _pg_kind(engine, table, column, call_id, service.timeout_s)
    key = table.primary_key[0] if len(table.primary_key) == 1 else None
    return _Target(table, column, key, "sqlite_vec", "", None, tuple(c.name for c in table.columns))


def _vector_text(values: Sequence[float], kind: Kind) -> str:
    body = ",".join(repr(float(v)) for v in values)
    return "{" + body + "}" if kind == "array" else "[" + body + "]"


def _dims(kind: Kind, ref: str) -> str:
    if kind == "sqlite_vec":
        return f"vec_length({ref})"
    if kind == "json":
        return f"JSON_LENGTH({ref})"
    # pgvector's types cast to real[]: no extension function, so no search_path or allowlist needed
    return f"CARDINALITY(CAST({ref} AS REAL[]))" if kind == "pgvector" else f"CARDINALITY({ref})"


def _distance(target: _Target, metric: Metric, col: str, ref: str) -> str:
    kind = target.kind
    if kind == "sqlite_vec":
        return f"vec_distance_{'cosine' if metric == 'cosine' else 'l2'}({col}, {ref})"
    if kind == "pgvector":
        # The operators, not the functions: an HNSW or IVFFlat index serves ORDER BY on them.
        schema = target.type_name.rsplit(".", 1)[0]
        return f"({col} OPERATOR({schema}.{'<=>' if metric == 'cosine' else '<->'}) {ref})"
    if kind == "json":
        pairs = " JOIN ".join(
            f"JSON_TABLE({doc}, '$[*]' COLUMNS (mk_i FOR ORDINALITY, mk_v DOUBLE PATH '$')) AS {side}"
            for doc, side in ((col, "mk_x"), (ref, "mk_y"))
        )
        pairs = f"FROM {pairs} ON mk_x.mk_i = mk_y.mk_i"
        a, b = "mk_x.mk_v", "mk_y.mk_v"
    else:
        pairs = f"FROM UNNEST(CAST({col} AS DOUBLE PRECISION[]), {ref}) AS mk_u(mk_a, mk_b)"
        a, b = "mk_a", "mk_b"
    if metric == "cosine":
        return f"(1 - (SELECT SUM({a} * {b}) / NULLIF(SQRT(SUM({a} * {a}) * SUM({b} * {b})), 0) {pairs}))"
    return f"(SELECT SQRT(SUM(({a} - {b}) * ({a} - {b}))) {pairs})"


def build_sql(target: _Target, args: SimilarRowsInput, dialect: str, rows: int) -> str:
    """The statement similar_rows sends for `rows` rows (admission then adds the row cap `rows + 1`)."""
    q = partial(_quote, dialect=dialect)
    table = _table_sql(target.table, dialect)
    col = f"t.{q(target.column)}"
    kind = target.kind
    names = {c.name.casefold() for c in target.table.columns}
    alias = q("distance" if "distance" not in names else "similarity_distance")
    where = [f"{col} IS NOT NULL"]
    if args.vector is not None:
        if target.dims is not None and target.dims != len(args.vector):
            raise Refused(
                f"That column holds {target.dims}-dimension vectors; the vector given has "
                f"{len(args.vector)}.",
                data={"reason": "dimension"},
                expose_data=True,
            )
        literal = exp.Literal.string(_vector_text(args.vector, kind)).sql(dialect=dialect)
        # sqlite-vec: converted to float32 once (a constant), not parsed again for every row
        ref = {
            "sqlite_vec": f"vec_f32({literal})",
            "pgvector": f"CAST({literal} AS {target.type_name})",
            "array": f"CAST({literal} AS DOUBLE PRECISION[])",
            "json": literal,
        }[kind]
        if target.dims is None:
            where.append(f"{_dims(kind, col)} = {len(args.vector)}")
    else:
        if target.key is None:
            raise Refused(_NO_KEY, data={"reason": "no_key"}, expose_data=True)
        key = q(target.key)
        literal = exp.Literal.string(str(args.row_id)).sql(dialect=dialect)
        # A scalar subquery, evaluated once (an InitPlan on PostgreSQL, so an index still serves it)
        vector = f"vec_f32({q(target.column)})" if kind == "sqlite_vec" else q(target.column)
        found = f"(SELECT {vector} FROM {table} WHERE {key} = {literal} AND {q(target.column)} IS NOT NULL)"
        ref = found if kind != "array" else f"CAST({found} AS DOUBLE PRECISION[])"
        where += [f"t.{key} <> {literal}", f"{found} IS NOT NULL"]
        if target.dims is None:
            where.append(f"{_dims(kind, col)} = {_dims(kind, found)}")
    distance = _distance(target, args.metric, col, ref)
    # Ties broken by the key, except for pgvector, whose index serves only ORDER BY the distance
    tie = f", t.{q(target.key)}" if target.key is not None and kind != "pgvector" else ""
    ranked = f"FROM {table} AS t WHERE {' AND '.join(where)} ORDER BY {alias}{tie}"
    if target.dims:
        shape = f"'<VECTOR({target.dims})>'"
    elif kind == "json":  # || is OR in MySQL
        shape = f"CONCAT('<VECTOR(', {_dims(kind, col)}, ')>')"
    else:
        shape = f"'<VECTOR(' || {_dims(kind, col)} || ')>'"
    shown = [f"{shape} AS {q(n)}" if n == target.column else f"t.{q(n)}" for n in target.shown]
    if kind != "sqlite_vec":
        return f"SELECT {', '.join(shown)}, {distance} AS {alias} {ranked}"
    # SQLite computes every output column before it sorts: the shape (one more parse of a JSON
    # vector) is left to the rows kept, outside an inner ranking cut at the same row cap.
    inner = ", ".join(f"t.{q(n)}" for n in target.shown)
    return (
        f"SELECT {', '.join(shown)}, t.{alias} FROM (SELECT {inner}, {distance} AS {alias} {ranked} "
        f"LIMIT {rows + 1}) AS t ORDER BY t.{alias}{tie}"
    )


def _header(result: QueryResult, args: SimilarRowsInput) -> str:
    to = (
        f"row {json.dumps(args.row_id, ensure_ascii=False)}"
        if args.row_id is not None
        else f"the given {len(args.vector or [])}-dimension vector"
    )
    n = result.row_count
    if n == 0:
        missing = " (or no readable row has that id)" if args.row_id is not None else ""
        return f"0 rows: no other row has a comparable vector in that column{missing}"
    return f"{n} nearest row{'' if n == 1 else 's'} to {to} by {args.metric} distance (smallest first)"


def similar_rows(
    service: SqlService, args: SimilarRowsInput, *, call_id: str, note: Callable[..., None] | None = None
) -> tuple[QueryResult, str]:
    """Rank the rows of a table by distance to a row or a vector, as `similar_rows` does.

    Returns:
        The structured result (the `distance` column last) and its markdown.

    Raises:
        Refused: no such table or column, not a vector column, masked, or admission said no.
        QueryFailed: the database failed the query (masked), e.g. a column this identity cannot read.
    """
    target = _target(service, args, call_id)
    rows = min(args.k, service.max_rows)
    sql = build_sql(target, args, service.engine.dialect, rows)
    result, markdown = service.query(sql, call_id=call_id, max_rows=rows, note=note)
    body = markdown.split("\n", 1)[1] if "\n" in markdown else ""
    return result, _header(result, args) + f"; {result.elapsed_ms:g} ms\n" + body


def similar_rows_tool(
    service: SqlService,
    serving: Callable[[Context], SqlService],
    audited: Callable[[Context], AbstractContextManager[None]],
    calls: CallAudit | None,
    timeout_s: float,
) -> Tool:
    """The `similar_rows` tool over `serving(ctx)`'s service (the caller's identity)."""

    def handler(args: SimilarRowsInput, ctx: Context) -> ToolResult:
        note = partial(calls.note, ctx.call_id) if calls is not None else None
        with audited(ctx):
            result, text_ = similar_rows(serving(ctx), args, call_id=ctx.call_id, note=note)
        return ToolResult(text=text_, structured=result)

    return Tool(
        name="similar_rows",
        title="Find similar rows",
        description=(
            "Rows of a table nearest to one row (row_id, its primary key) or to a vector, by the "
            "distance between an embedding column's vectors, computed in the database; the last "
            f"column is the distance. At most k rows (default 10, at most {min(MAX_K, service.max_rows)})."
        ),
        input=SimilarRowsInput,
        output=QueryResult,
        handler=handler,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        category="sql",
        keywords=("similarity", "embedding", "vector", "nearest"),
        timeout_s=timeout_s,
    )
