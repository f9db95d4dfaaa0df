"""Shaping and rendering: one cell at a time, and no value can forge table structure."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from mcpkit.sql.engines.base import Column, Rows
from mcpkit.sql.models import QueryResult
from mcpkit.sql.render import answer_chars, escape_cell, render_markdown
from mcpkit.sql.shaping import CELL_MAX_CHARS, shape_cell, shape_rows


class _Lob:
    """A driver LOB handle: reading it whole is what must never happen."""

    def read(self) -> bytes:
        raise AssertionError("the LOB was read")

    def size(self) -> int:
        return 10**9


def test_binary() -> None:
    assert shape_cell(b"\x00" * 300) == "<binary 300 bytes>"
    assert shape_cell(memoryview(b"abc")) == "<binary 3 bytes>"
    assert shape_cell(bytearray(5)) == "<binary 5 bytes>"


def test_lob_handle_is_never_read() -> None:
    assert shape_cell(_Lob()) == "<LOB>"


def test_vectors() -> None:
    assert shape_cell([0.1] * 384) == "<VECTOR(384)>"
    assert shape_cell("[" + ",".join(["0.25"] * 768) + "]", "vector") == "<VECTOR(768)>"
    assert shape_cell("{1:0.5,7:0.25}/1536", "sparsevec") == "<VECTOR(1536)>"
    assert shape_cell(json.dumps([0.5] * 64)) == "<VECTOR(64)>"
    assert shape_cell([1, 2, 3]) == [1, 2, 3]  # a short array stays data
    assert shape_cell(["a"] * 40) != "<VECTOR(40)>"


def test_long_text_is_clipped() -> None:
    out = shape_cell("é" * 2000)
    assert isinstance(out, str) and len(out) == CELL_MAX_CHARS + 3 and out.endswith("...")
    assert shape_cell("short") == "short"


def test_numbers_and_times() -> None:
    assert shape_cell(Decimal("10.00")) == 10
    assert shape_cell(Decimal("0.1")) == 0.1
    assert shape_cell(Decimal("12345678901234567890.123456789")) == "12345678901234567890.123456789"
    assert shape_cell(float("nan")) == "nan"
    assert shape_cell(dt.date(2024, 1, 2)) == "2024-01-02"
    assert shape_cell(dt.timedelta(hours=1)) == "01:00:00"
    # as SQL writes a duration (red team my11 F5: `-1 day, 23:00:00`, `2 days, 0:00:00`)
    assert shape_cell(dt.timedelta(hours=-1)) == "-01:00:00"
    assert shape_cell(dt.timedelta(hours=48)) == "48:00:00"
    assert shape_cell(dt.timedelta(hours=-838, minutes=-59, seconds=-59)) == "-838:59:59"
    assert shape_cell(dt.timedelta(seconds=-1.25)) == "-00:00:01.25"
    u = uuid.UUID(int=1)
    assert shape_cell(u) == str(u)
    assert shape_cell(True) is True and shape_cell(None) is None


def test_nested_json_stays_small() -> None:
    assert shape_cell({"a": [1, 2]}) == {"a": [1, 2]}
    big = shape_cell({"k": "x" * 1000})
    assert isinstance(big, str) and big.endswith("...") and len(big) <= CELL_MAX_CHARS + 3


def test_escape_cell() -> None:
    assert escape_cell("a|b") == "a\\|b"
    assert escape_cell("line1\nline2\r\n") == "line1\\nline2\\r\\n"
    assert escape_cell("back\\slash") == "back\\\\slash"
    assert escape_cell("\u2028\x00") == "\\u2028\\u0000"


@given(st.text())
def test_no_value_can_forge_a_row_or_a_cell(value: str) -> None:
    line = escape_cell(value)
    assert not any(ch in line for ch in "\n\r\u2028\u2029\u0085\x0b\x0c")
    # every pipe is escaped: strip escaped pairs, no pipe may remain
    i, bare = 0, []
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        bare.append(line[i])
        i += 1
    assert "|" not in bare


_CELLS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.sampled_from(
        ["a|b", 'say "x"', '"' * 9, "back\\slash", "\u2028", "\x7f", "\x85", "\x01" * 4, "\u200b"]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@given(st.lists(_CELLS, max_size=6))
@example(['"' * 9])
@example(["\x01" * 4, None])
def test_answer_chars_counts_exactly_the_rows_markdown_line_and_json(row: list[Any]) -> None:
    def text(v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list | dict):
            return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        return v if isinstance(v, str) else str(v)

    line = "| " + " | ".join(escape_cell(text(v)) for v in row) + " |"
    as_json = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    assert answer_chars(row) == max(4 + sum(len(escape_cell(text(v))) + 3 for v in row), len(as_json))
    # the rendered table shows each cell the same way
    result = QueryResult(
        columns=[f"c{i}" for i in range(len(row))], rows=[row], row_count=1, truncated=False, elapsed_ms=1.0
    )
    if row:
        assert render_markdown(result).split("\n")[-1] == line


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_rendered_table_has_one_line_per_row(values: list[str]) -> None:
    result = QueryResult(
        columns=["a|b", "c"],
        rows=[[v, v] for v in values],
        row_count=len(values),
        truncated=False,
        elapsed_ms=1.0,
    )
    lines = render_markdown(result).split("\n")
    assert len(lines) == 2 + 2 + len(values)  # metadata, blank, header, rule, rows


def test_markdown_shape() -> None:
    rows = Rows(
        columns=(Column("region"), Column("receipt"), Column("embedding", "vector")),
        rows=(("North | South\nEast", b"\x01\x02", "[" + ",".join(["1"] * 32) + "]"),),
        more=True,
        elapsed_s=0.0123,
    )
    result = shape_rows(rows)
    assert result.truncated and result.row_count == 1
    text = render_markdown(result)
    assert text.splitlines()[0] == (
        "1 row sent; more rows exist (aggregate or filter in SQL, or ask for more with max_rows); 12.3 ms"
    )
    assert "| North \\| South\\nEast | <binary 2 bytes> | <VECTOR(32)> |" in text
    assert text.count("| region |") == 1


def test_cut_cells_are_counted_in_the_notice_and_a_text_ending_in_dots_is_not() -> None:
    from mcpkit.sql.clipping import Clipped

    def shaped(*row: Any) -> QueryResult:
        return shape_rows(Rows(tuple(Column(f"c{i}") for i in range(len(row))), (row,), False, 0.0))

    assert shaped("x" * 400 + "...", "y" * CELL_MAX_CHARS).notice is None  # nothing was cut
    one = shaped("x" * 100_003, "short")
    assert one.rows[0][0] == "x" * CELL_MAX_CHARS + "..." and not one.truncated
    assert one.notice is not None and one.notice.startswith("1 cell longer than the answer shows")
    assert "1 cell" in render_markdown(one).splitlines()[0]
    two = shaped(Clipped("abc"), [{"k": "v" * 20}] * 40, "ok...")  # cut in SQL; long JSON
    assert two.notice is not None and two.notice.startswith("2 cells longer")


def test_structured_result_schema() -> None:
    schema = QueryResult.model_json_schema()
    assert set(schema["required"]) == {"columns", "rows", "row_count", "truncated", "elapsed_ms"}
    assert schema["additionalProperties"] is False
