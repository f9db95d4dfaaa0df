"""Shaping: turn each database value into a small, JSON-safe cell, one cell at a time."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

from pydantic import JsonValue

from mcpkit.sql.clipping import BinarySize, Clipped
from mcpkit.sql.engines.base import Rows
from mcpkit.sql.models import QueryResult
from mcpkit.sql.render import MORE_ROWS, answer_chars

__all__ = [
    "ANSWER_MAX_CHARS",
    "CELL_MAX_CHARS",
    "VECTOR_MIN_DIM",
    "VECTOR_TYPES",
    "clip",
    "shape_cell",
    "shape_rows",
]

CELL_MAX_CHARS: Final = 500
ANSWER_MAX_CHARS: Final = 200_000
"""Characters the rows of one answer may take (markdown or JSON, whichever is longer)."""
VECTOR_MIN_DIM: Final = 16
VECTOR_TYPES: Final = frozenset({"vector", "halfvec", "sparsevec", "VECTOR"})
_JSON_SNIFF_MAX: Final = 1_000_000


def clip(text: str, limit: int = CELL_MAX_CHARS) -> str:
    """Cut `text` to `limit` characters, marking the cut with `...`.

    >>> clip("abcdef", 3)
    'abc...'
    """
    return text if len(text) <= limit else text[:limit] + "..."


def _number(value: Decimal | float) -> JsonValue:
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if not value.is_finite():
        return str(value)
    if value == value.to_integral_value() and abs(value) < 2**53:
        return int(value)
    as_float = float(value)
    return as_float if Decimal(repr(as_float)) == value.normalize() else str(value)


def _vector_dim(value: Any, type_name: str | None) -> int | None:
    # pgvector arrives as text ("[1,2,3]", sparsevec "{1:0.5}/768"); float arrays as lists;
    # embeddings stored as JSON text as a string starting with "[".
    if type_name in VECTOR_TYPES:
        text = str(value)
        if "/" in text:
            tail = text.rsplit("/", 1)[1]
            return int(tail) if tail.isdigit() else None
        body = text.strip().strip("[]")
        return len(body.split(",")) if body else 0
    if isinstance(value, list | tuple):
        numeric = len(value) >= VECTOR_MIN_DIM and all(
            isinstance(v, int | float | Decimal) and not isinstance(v, bool) for v in value
        )
        return len(value) if numeric else None
    if (
        isinstance(value, str)
        and value.startswith("[")
        and VECTOR_MIN_DIM * 2 <= len(value) < _JSON_SNIFF_MAX
    ):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return _vector_dim(parsed, None) if isinstance(parsed, list) else None
    return None


def limit_chars(text: str) -> int:
    """Characters of a clipped cell to show (the cell limit)."""
    return min(len(text), CELL_MAX_CHARS)


def _fits(value: JsonValue) -> JsonValue:
    # A nested value (JSON, arrays) stays structured when short, else becomes clipped JSON text.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return value if len(text) <= CELL_MAX_CHARS else clip(text)


def shape_cell(value: Any, type_name: str | None = None) -> JsonValue:
    """One database value as a JSON-safe cell that cannot flood the context.

    >>> shape_cell(b"\\x00\\x01\\x02")
    '<binary 3 bytes>'
    >>> shape_cell([0.5] * 384)
    '<VECTOR(384)>'
    >>> shape_cell("x" * 600)[-5:]
    'xx...'
    >>> shape_cell(Decimal("12.50"))
    12.5

    Args:
        value: A value as the driver returned it.
        type_name: The database's type name for the column, when known.

    Returns:
        None, bool, int, float, str, or a short list/dict; binary, large-object handles and
        vectors become `<binary N bytes>`, `<LOB>`, `<VECTOR(dim)>`; long text is clipped.
    """
    if value is None or isinstance(value, bool | int):
        return value
    if type(value) is str and type_name not in VECTOR_TYPES and not value.startswith("["):
        return clip(value)  # the commonest cell, and what the checks below would make of it
    if isinstance(value, Clipped):  # cut in SQL: always marked as cut
        return value.text[: limit_chars(value.text)] + "..."
    if isinstance(value, BinarySize):
        return f"<binary {value.size} bytes>"
    if isinstance(value, float | Decimal):
        return _number(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<binary {len(value) if not isinstance(value, memoryview) else value.nbytes} bytes>"
    if hasattr(value, "read") and not isinstance(value, str):
        return "<LOB>"  # a driver large-object handle: never read it whole
    dim = _vector_dim(value, type_name)
    if dim is not None:
        return f"<VECTOR({dim})>"
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _duration(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return _fits([shape_cell(v) for v in value[: CELL_MAX_CHARS // 2]])
    if isinstance(value, dict):
        items = list(value.items())[: CELL_MAX_CHARS // 4]
        return _fits({str(k): shape_cell(v) for k, v in items})
    return clip(str(value))


def _duration(value: dt.timedelta) -> str:
    """A duration as SQL writes one, `-01:00:00` or `48:00:00.5` (Python's str reads `-1 day, 23:00:00`)."""
    micros = abs(value) // dt.timedelta(microseconds=1)
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    text = f"{'-' if value < dt.timedelta(0) else ''}{hours:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{fraction:06d}".rstrip("0") if fraction else text


def _was_cut(value: Any) -> bool:
    # a text that ends in "..." itself is not cut; anything shaped longer than the limit is
    return isinstance(value, Clipped) or not isinstance(value, str) or len(value) > CELL_MAX_CHARS


def shape_rows(rows: Rows, max_rows: int | None = None, max_chars: int = ANSWER_MAX_CHARS) -> QueryResult:
    """Shape an engine result into the structured answer of `execute_query`.

    Rows stop at a row boundary before the answer (its markdown, and its JSON) passes `max_chars`
    characters; the answer then says it was cut for size (`notice`), as it does when the engine
    fetched fewer rows because the row is wide (`Rows.cut_for_size`).

    Args:
        rows: What the engine returned.
        max_rows: Rows to keep (the engine's limit when None).
        max_chars: Characters the rows may take in the answer.

    Returns:
        Columns, shaped rows, whether more rows exist (and why fewer were sent), elapsed time.
    """
    kept: Sequence[tuple[Any, ...]] = rows.rows if max_rows is None else rows.rows[:max_rows]
    types = [c.type_name for c in rows.columns]
    names = [c.name for c in rows.columns]
    used = answer_chars(names)
    shaped: list[list[JsonValue]] = []
    cut = 0
    for r in kept:
        row = [shape_cell(v, types[i] if i < len(types) else None) for i, v in enumerate(r)]
        used += answer_chars(row)
        if used > max_chars:
            break
        shaped.append(row)
        cut += sum(
            1 for v, c in zip(r, row, strict=False) if type(c) is str and c.endswith("...") and _was_cut(v)
        )
    notice = None
    if len(shaped) < len(kept):
        notice = (
            f"more rows exist; the answer stopped after {len(shaped)} rows to stay under "
            f"{max_chars:,} characters (select fewer or shorter columns, aggregate, or filter in SQL)"
        )
    elif rows.cut_for_size:
        notice = (
            f"more rows exist; only {len(shaped)} rows were fetched because each row is wide "
            "(select fewer columns, aggregate, or filter in SQL)"
        )
    truncated = rows.more or len(shaped) < len(rows.rows)
    if cut:
        cells = (
            f"{cut} cell{'s' if cut > 1 else ''} longer than the answer shows "
            f"(cut at {CELL_MAX_CHARS} characters or fewer, ending in ...; select a part with substr())"
        )
        more = notice or (MORE_ROWS if truncated else None)
        notice = cells if more is None else f"{more}; {cells}"
    return QueryResult(
        columns=names,
        rows=shaped,
        row_count=len(shaped),
        truncated=truncated,
        elapsed_ms=round(rows.elapsed_s * 1000, 1),
        notice=notice,
    )
