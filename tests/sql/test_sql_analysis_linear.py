"""The Python-side analysis reads one literal in time linear in its length, once per call, and a
number too long for Python's int() is refused with a stable code (red team rt26 F1, F4).

Work is counted (characters the cost model examines), not timed: the old `_class_end` ran a
`find(":]")` to the end of the pattern at every `[:` (`'[' + '[:' * 49_000`: 4.5 s alone, 9 s of
admission per call, measured), the old `_repeat` a `find("}")` at every `{`.
"""

from __future__ import annotations

import contextlib
from typing import Any, SupportsIndex

import pytest

from mcpkit.errors import Refused
from mcpkit.sql.admission import admit
from mcpkit.sql.admission import regex_cost as regex_module
from mcpkit.sql.admission.regex_cost import PatternTooComplex, pattern_cost


class _Counted(str):
    """A pattern that counts the characters the cost model examines."""

    seen = 0

    def __getitem__(self, key: Any) -> str:
        got = str.__getitem__(self, key)
        _Counted.seen += max(len(got), 1)
        return got

    def find(self, sub: str, start: SupportsIndex | None = None, end: SupportsIndex | None = None) -> int:
        at = str.find(self, sub, start, end)
        _Counted.seen += (len(self) if at < 0 else at) - int(start or 0)
        return at

    def startswith(
        self, prefix: Any, start: SupportsIndex | None = None, end: SupportsIndex | None = None
    ) -> bool:
        _Counted.seen += 2
        return str.startswith(self, prefix, start, end)


def _examined(text: str) -> int:
    _Counted.seen = 0
    with contextlib.suppress(PatternTooComplex):
        pattern_cost(_Counted(text))
    return _Counted.seen


@pytest.mark.parametrize(
    "shape",
    [
        "[" + "[:" * 2000,  # F1: no `:]` anywhere
        "[" + "[:" * 2000 + "x]",
        "a" + "{" * 4000 + "}",  # a `{` that is no repetition, each searched to the end
        "a" + "{" * 4000,
        "[" + "[:a" * 1300 + ":]",
        "\\Q" * 2000,  # controls: linear before the fix too
        "(?#" * 1300,
        "[[:alpha:]]" * 400,
    ],
)
def test_the_cost_model_examines_each_character_a_bounded_number_of_times(shape: str) -> None:
    assert _examined(shape) <= 12 * len(shape)


def test_the_red_team_pattern_is_admitted_within_the_budget() -> None:
    # 98,010 characters, under MAX_SQL_CHARS: refused "took too long to analyse" after 9-20 s before
    sql = "SELECT 'a' REGEXP '[" + "[:" * 49_000 + "x]'"
    assert "(*LIMIT_MATCH=" in admit(sql, "mysql", limit=101).sql


def test_a_pattern_is_read_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    read = regex_module._read

    def counting(text: str) -> Any:
        reads.append(text)
        return read(text)

    monkeypatch.setattr(regex_module, "_read", counting)
    admit("SELECT id FROM t WHERE a REGEXP '[a-z]+x' AND b REGEXP '[a-z]+x' AND c REGEXP 'y*'", "mysql")
    assert sorted(reads) == ["[a-z]+x", "y*"]
    pattern_cost("[a-z]+x")  # outside a call: nothing is kept
    pattern_cost("[a-z]+x")
    assert len(reads) == 4


def test_posix_classes_are_read_as_pcre_reads_them() -> None:
    # MariaDB: ':x:]' REGEXP '^[[:]x:]$' is 1 (the class is `[[:]`), so the `(a)` after it is a group
    assert pattern_cost("[[:]x:](a|b)").paths > pattern_cost("[[:alpha:]x](a|b)").paths // 2
    assert pattern_cost("[:[:]:]()").paths == 64  # read as `[:[:]` `:]` `()`: one group
    assert pattern_cost("[[:alpha:][:digit:]]+").degree == 2


DIGITS = "9" * 5000


@pytest.mark.parametrize(
    ("dialect", "sql", "reason"),
    [
        ("sqlite", f"SELECT id FROM sales_demo LIMIT {DIGITS}", "too_long"),
        ("postgres", f"SELECT 1 ORDER BY {DIGITS}", "too_long"),
        ("mysql", f"SELECT {DIGITS} + 1", "too_long"),
        ("mysql", f"SELECT 'a' REGEXP 'a{{{DIGITS}}}'", "too_complex"),
        ("mysql", f"SELECT 'a' REGEXP 'a{{2,{DIGITS}}}'", "too_complex"),
        ("mysql", "SELECT 'a' REGEXP 'a{65536,}'", "too_complex"),  # MariaDB: "number too big in {}"
    ],
)
def test_a_number_too_long_is_refused_with_a_stable_code(dialect: str, sql: str, reason: str) -> None:
    with pytest.raises(Refused) as info:
        admit(sql, dialect, limit=101)
    assert info.value.data == {"reason": reason}


@pytest.mark.parametrize("spec", [f"%{DIGITS}s", f"%{DIGITS}$s", f"%*{DIGITS}$s"])
def test_a_format_width_too_long_is_no_internal_error(spec: str) -> None:
    with contextlib.suppress(Refused):
        admit(f"SELECT format('{spec}', 'x', 3)", "postgres", limit=101)


def test_numbers_up_to_the_cap_are_read() -> None:
    assert admit("SELECT " + "9" * 1000, "sqlite", limit=101).sql.startswith("SELECT 999")
    assert admit("SELECT 'a' REGEXP 'a{65535,}'", "mysql", limit=101).sql
