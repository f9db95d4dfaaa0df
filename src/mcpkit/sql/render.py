"""Rendering: results as a markdown table under one metadata line; values cannot forge structure."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Final

from pydantic import JsonValue

from mcpkit.sql.models import QueryResult, SourcesTableList, TableDescription, TableList

__all__ = [
    "MORE_ROWS",
    "answer_chars",
    "escape_cell",
    "render_description",
    "render_markdown",
    "render_sources_table_list",
    "render_table_list",
]

MORE_ROWS: Final = "more rows exist (aggregate or filter in SQL, or ask for more with max_rows)"
"""What an answer says when more rows exist and no notice says why fewer were sent."""
_ESCAPES: Final = {"\\": "\\\\", "|": "\\|", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What must be escaped: the named escapes, C0 controls, DEL, NEL, the line and paragraph separators.
_UNSAFE: Final = re.compile(r"[\\|\x00-\x1f\x7f\x85\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def escape_cell(text: str) -> str:
    r"""Escape a cell so it stays one cell of one row: backslash, pipe, line breaks, control characters.

    >>> escape_cell("a|b\nc")
    'a\\|b\\nc'

    Args:
        text: The cell's text.

    Returns:
        Text with no unescaped `|` and no line break of any kind.
    """
    return _UNSAFE.sub(_escape, text)  # a regex: a per-character loop cost more than the query


def _text(value: JsonValue) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _plain(text: str) -> bool:
    """Whether neither the markdown nor JSON escapes anything in `text` (every character they
    escape is unprintable, a pipe, a backslash or a quote)."""
    return text.isprintable() and "|" not in text and "\\" not in text and '"' not in text


def _cell_chars(value: JsonValue) -> tuple[int, int]:
    """Characters of `value` in a markdown cell and in JSON, without building either when plain."""
    if isinstance(value, str):
        if _plain(value):
            return len(value), len(value) + 2
    elif (
        value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value))
    ):
        text = _text(value)  # as json.dumps writes them: null, true, false, repr of the number
        return len(text), len("null" if value is None else text)
    return len(escape_cell(_text(value))), len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def answer_chars(row: Sequence[JsonValue]) -> int:
    """Characters one row adds to the answer: the longer of its markdown line and its JSON.

    >>> answer_chars(["a|b", 1, None])
    22
    """
    line = 4 + 3 * len(row)
    as_json = 1 + max(1, len(row))  # the brackets and the commas
    for value in row:
        md, js = _cell_chars(value)
        line += md
        as_json += js
    return max(line, as_json)


def _cell(value: JsonValue) -> str:
    text = _text(value)
    return text if _plain(text) else escape_cell(text)


def _table(header: Sequence[str], rows: Sequence[Sequence[JsonValue]]) -> list[str]:
    lines = ["| " + " | ".join(escape_cell(h) for h in header) + " |", "|" + " --- |" * len(header)]
    lines.extend("| " + " | ".join(_cell(v) for v in row) + " |" for row in rows)
    return lines


def render_markdown(result: QueryResult) -> str:
    """The text the model reads: one metadata line, then a markdown table with the names once.

    >>> r = QueryResult(columns=["n"], rows=[[1]], row_count=1, truncated=True, elapsed_ms=2.0)
    >>> print(render_markdown(r))
    1 row sent; more rows exist (aggregate or filter in SQL, or ask for more with max_rows); 2 ms
    <BLANKLINE>
    | n |
    | --- |
    | 1 |

    Args:
        result: A shaped result.

    Returns:
        Markdown.
    """
    n = result.row_count
    if result.truncated:
        more = result.notice or MORE_ROWS
    else:  # a notice without more rows: cells were cut
        more = "no more rows" + (f"; {result.notice}" if result.notice else "")
    meta = f"{n} row{'' if n == 1 else 's'} sent; {more}; {result.elapsed_ms:g} ms"
    if not result.columns:
        return meta + "\n\n(the statement returned no columns)"
    return "\n".join([meta, "", *_table(result.columns, result.rows)])


def render_table_list(tables: TableList) -> str:
    """`list_tables` as markdown: schema, name, kind, row estimate."""
    rows: list[list[JsonValue]] = [
        [
            t.table_schema,
            t.name,
            t.kind,
            (t.row_estimate_note or "?") if t.row_estimate is None else t.row_estimate,
        ]
        for t in tables.tables
    ]
    meta = f"{len(rows)} table{'' if len(rows) == 1 else 's'} and views readable" + (
        " (list cut; name a schema to see more)" if tables.truncated else ""
    )
    return "\n".join([meta, "", *_table(["schema", "name", "kind", "rows (estimate)"], rows)])


def render_sources_table_list(found: SourcesTableList) -> str:
    """`list_tables` over several databases: one section per source."""
    parts = []
    for s in found.sources:
        head = f"## source {s.source} ({s.dialect})"
        if not s.available:
            parts.append(f"{head}\nnot reachable right now; its tables are not listed")
            continue
        listing = TableList(tables=s.tables, truncated=s.truncated)
        parts.append(f"{head}\n{render_table_list(listing)}")
    return "\n\n".join(parts)


def render_description(table: TableDescription) -> str:
    """`describe_table` as markdown: one line about the table, columns, then keys and indexes."""
    title = f"{table.kind} {table.table_schema + '.' if table.table_schema else ''}{table.name}"
    head = escape_cell(title) + (f" -- {escape_cell(table.comment)}" if table.comment else "")
    if table.row_estimate is not None:
        head += f" (about {table.row_estimate} rows)"
    elif table.row_estimate_note:
        head += f" (row count {escape_cell(table.row_estimate_note)})"
    cols: list[list[JsonValue]] = [
        [c.name, c.type, "yes" if c.nullable else "no", "PK" if c.primary_key else "", c.comment or ""]
        for c in table.columns
    ]
    lines = [head, "", *_table(["column", "type", "nullable", "key", "comment"], cols)]
    for fk in table.foreign_keys:
        target = f"{fk.references_schema + '.' if fk.references_schema else ''}{fk.references_table}"
        lines.append(
            escape_cell(f"FK ({', '.join(fk.columns)}) -> {target} ({', '.join(fk.references_columns)})")
        )
    for ix in table.indexes:
        kind = "unique index" if ix.unique else "index"
        lines.append(escape_cell(f"{kind} {ix.name or ''} ({', '.join(c or '?' for c in ix.columns)})"))
    return "\n".join(lines)
