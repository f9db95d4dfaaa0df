"""An upper bound on what a regular expression costs a backtracking engine (MariaDB's PCRE),
read off its literal text before the query runs.

PCRE tries the pattern from every position of the subject and backtracks into every way the
pattern could have matched so far; nothing in MariaDB stops it (no KILL, no statement timeout, and
its match limit was not reached in the cases measured). Each unbounded quantifier can rescan the
rest of the subject (`[a-z]*+[0-9]`: subject^2), and each group of alternatives multiplies the
paths (`(a|a)(a|a)...`: 2^groups per position, red team rt16 F2). So a pattern costs at most
subject^(quantifiers + 1) x (the product of its groups' alternatives and bounded repetitions),
times a constant for the slower group steps; a quantifier on a group (`(a+)+`) is exponential in
the subject and refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlglot import exp

from mcpkit.sql.errors import refuse

__all__ = [
    "MAX_DEGREE",
    "MAX_PATHS",
    "PatternCost",
    "PatternTooComplex",
    "literal_pattern_cost",
    "pattern_cost",
]

MAX_DEGREE: Final = 4
"""Unbounded quantifiers + 1 a pattern may have: the power of the subject's length it costs."""
MAX_PATHS: Final = 4096
"""Ways through a pattern's groups and bounded repetitions it may have."""
GROUP_STEP: Final = 64
"""What one backtracking step through groups costs against one through a class (measured: a path
through 18 alternation groups about 70x a `[a-z]*` step)."""


@dataclass(frozen=True)
class PatternCost:
    """The subject's length to the power `degree`, times `paths`, bounds the steps."""

    degree: int
    paths: int
    plain: bool  # no metacharacter beyond `^ $ .` and top-level `|`: a search


class PatternTooComplex(ValueError):
    """The pattern is exponential in its subject, or past `MAX_DEGREE` / `MAX_PATHS`."""


def _repeat(text: str, i: int) -> tuple[int | None, int | None, int]:
    """`{m}`, `{m,}`, `{m,n}` at `text[i]`: (low, high or None when unbounded, next index); a `{`
    that is no repetition is read as a literal: (None, None, i + 1)."""
    end = text.find("}", i)
    body = text[i + 1 : end] if end > i else ""
    low, comma, high = body.partition(",")
    if not low.isdigit() or (high and not high.isdigit()):
        return None, None, i + 1
    top = None if comma and not high else int(high or low)
    return int(low), top, end + 1


def pattern_cost(text: str) -> PatternCost:
    """The cost bound of a pattern, or `PatternTooComplex`.

    >>> pattern_cost("refund|chargeback")
    PatternCost(degree=1, paths=2, plain=True)
    >>> pattern_cost("[a-z]*+[0-9]")
    PatternCost(degree=2, paths=1, plain=False)
    >>> pattern_cost("(jpg|png|gif)$").paths  # three ways, each a slower group step
    192
    """
    degree, paths, plain, groups = 1, 1, True, False
    stack: list[int] = []
    last_group = 0  # alternatives of the group just closed, 0 after anything else
    i = 0
    while i < len(text):
        c = text[i]
        quantified = last_group
        last_group = 0
        if c == "\\":
            plain, i = False, i + 2
            continue
        if c == "[":
            plain, j = False, i + 1
            j += text[j : j + 1] == "^"
            j += text[j : j + 1] == "]"
            close = text.find("]", j)
            i = close + 1 if close >= 0 else len(text)
            continue
        if c == "(":
            plain, groups = False, True
            stack.append(1)
        elif c == ")" and stack:
            last_group = stack.pop()
            paths *= last_group
        elif c == "|":
            if stack:
                stack[-1] += 1
            else:
                paths += 1  # top-level alternatives are tried in turn: they add
        elif c in "*+?{":
            plain = False
            low, high, nxt = (
                (0, None, i + 1) if c in "*+" else (0, 1, i + 1) if c == "?" else _repeat(text, i)
            )
            if nxt == i + 1 and c == "{" and low is None:
                i += 1
                continue
            if high is None:
                if quantified:
                    raise PatternTooComplex("a quantifier on a group")
                degree += 1
            elif quantified:
                paths *= quantified ** max(high - 1, 0) * (high - (low or 0) + 1)
            else:
                paths *= high - (low or 0) + 1
            i = nxt
            i += i < len(text) and text[i] in "?+"  # lazy or possessive
            continue
        i += 1
    if degree > MAX_DEGREE or paths > MAX_PATHS:
        raise PatternTooComplex("too many quantifiers or alternatives")
    return PatternCost(degree, paths * (GROUP_STEP if groups else 1), plain)


def literal_pattern_cost(regex: exp.Expr) -> PatternCost:
    """What a literal regular expression may cost (`pattern_cost`); a computed or exponential one
    is refused."""
    if not (isinstance(regex, exp.Literal) and regex.is_string):
        refuse(
            "too_complex",
            "A regular expression is answered only when written as a literal here (what a computed"
            " one costs cannot be bounded); write the pattern out.",
        )
    try:
        return pattern_cost(regex.this)
    except PatternTooComplex:
        refuse(
            "too_complex",
            f"The regular expression could take exponential time (more than {MAX_DEGREE - 1} unbounded"
            f" quantifiers, more than {MAX_PATHS} ways through its groups, or a quantifier on a"
            " group); simplify it, or filter with LIKE first.",
        )
