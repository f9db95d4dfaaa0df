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
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING

from mcpkit import Context, Tool, ToolAnnotations, ToolResult
from mcpkit.sql.engines.engine import SqlEngine
from mcpkit.sql.errors import SqlConfigError
from mcpkit.sql.models import QueryResult
from mcpkit.sql.service import SqlService
from mcpkit.sql.similar.ranking import build_sql
from mcpkit.sql.similar.target import MAX_DIM, MAX_K, SimilarRowsInput, find_target

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


def enable_similarity(service: SqlService) -> None:
    """Prepare a service's engine for similar_rows, or refuse to start.

    SQLite: every new connection loads sqlite-vec (checked once here; a second call does nothing).
    PostgreSQL: nothing to load; pgvector columns are used where the extension is installed, float
    arrays everywhere.
    MySQL/MariaDB: nothing to load; JSON arrays through `JSON_TABLE`.

    Raises:
        SqlConfigError: the engine has no vector support mcpkit can use.
    """
    engine = service.engine
    if not isinstance(engine, SqlEngine):
        raise SqlConfigError("--similar needs a database engine it can reflect")
    if engine.profile.vector_kind is None:
        raise SqlConfigError(
            "--similar: only SQLite (sqlite-vec), PostgreSQL (pgvector or float arrays) and "
            "MySQL/MariaDB (JSON arrays) can rank rows by similarity"
        )
    probe = engine.profile.use_vectors()  # None: nothing to load, or loaded before (start-up, build_server)
    if probe is not None:
        rows = engine.execute(probe, None, 1, service.timeout_s, "startup-similar")
        if rows.rows != ((2,),):  # pragma: no cover - the extension answered something else
            raise SqlConfigError("--similar: the vector extension did not answer as expected")


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
    target = find_target(service, args, call_id)
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
