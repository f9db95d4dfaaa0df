"""The one SELECT similar_rows sends: the distance in the engine's own terms, vectors shaped in SQL."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from sqlglot import exp

from mcpkit.errors import Refused

if TYPE_CHECKING:
    pass
from mcpkit.sql.similar.target import (
    NO_KEY,
    Kind,
    Metric,
    SimilarRowsInput,
    Target,
    quote_name,
    table_sql,
)


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


def _distance(target: Target, metric: Metric, col: str, ref: str) -> str:
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


def build_sql(target: Target, args: SimilarRowsInput, dialect: str, rows: int) -> str:
    """The statement similar_rows sends for `rows` rows (admission then adds the row cap `rows + 1`)."""
    q = partial(quote_name, dialect=dialect)
    table = table_sql(target.table, dialect)
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
            raise Refused(NO_KEY, data={"reason": "no_key"}, expose_data=True)
        key = q(target.key)
        literal = exp.Literal.string(str(args.row_id)).sql(dialect=dialect)
        # A scalar subquery, evaluated once (an InitPlan on PostgreSQL, so an index still serves it)
        vector = f"vec_f32({q(target.column)})" if kind == "sqlite_vec" else q(target.column)
        found = f"(SELECT {vector} FROM {table} WHERE {key} = {literal} AND {q(target.column)} IS NOT NULL)"
        # pgvector: cast to its own type (a no-op) so admission sees a vector distance, not
        # pg_trgm's text `<->`, and leaves the ORDER BY as written for the index
        casts = {"array": "DOUBLE PRECISION[]", "pgvector": target.type_name}
        ref = f"CAST({found} AS {casts[kind]})" if kind in casts else found
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
