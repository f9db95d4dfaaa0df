"""An upper bound on what a regular expression costs a backtracking engine (MariaDB's PCRE),
read off its literal text before the query runs: the early, clear refusal. The engine enforces
the bound itself (`SearchBounds.match_limit`: PCRE2's in-pattern match limit).

PCRE tries the pattern from every position of the subject and backtracks into every way the
pattern could have matched so far; nothing in MariaDB stops it (no KILL, no statement timeout).
Each unbounded quantifier can rescan the rest of the subject (`[a-z]*+[0-9]`: subject^2), each
group of alternatives multiplies the paths (`(a|a)(a|a)...`: 2^groups per position, red team
rt16 F2), and a repeated group multiplies them by its own paths once per repetition
(`(a?){22}`: 2^22, issue 10 F1). So a pattern costs at most subject^(quantifiers + 1) x its paths,
times a constant for the slower group steps; an unbounded quantifier on a group (`(a+)+`) is
exponential in the subject and refused. Escapes are read whole (`\\c)`, `\\Q)\\E`, `\\x{..}`), so
no escaped `)` or `|` is taken for a group's end or an alternative; verbs (`(*LIMIT_MATCH=..)`,
which could raise the engine's limit), recursion, subroutine calls and extended mode (`(?x)`,
whose comments hide text) are refused.

The pattern is one string literal, which the token and node limits do not see, so it is read in
one left-to-right pass, each character examined a bounded number of times, and once per call
(`costs_read_once`): a scan to the end at each `[:` made a 98 KB pattern cost 9 s a call (red team
rt26 F1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_DEGREE",
    "MAX_PATHS",
    "MAX_REPEAT",
    "PatternCost",
    "PatternTooComplex",
    "costs_read_once",
    "pattern_cost",
]

MAX_DEGREE: Final = 4
"""Unbounded quantifiers + 1 a pattern may have: the power of the subject's length it costs."""
MAX_PATHS: Final = 4096
"""Ways through a pattern's groups and bounded repetitions it may have."""
GROUP_STEP: Final = 64
"""What one backtracking step through groups costs against one through a class (measured: a path
through 18 alternation groups about 70x a `[a-z]*` step)."""
_BRACED: Final = frozenset("xNpPo")  # `\x{..}`, `\p{..}`, `\o{..}`, ...
_UNCOUNTED: Final = frozenset("Xgk")  # `\X` scans a grapheme cluster; `\g`, `\k` refer back
_NAMED: Final = {"<": ">", "'": "'", "{": "}"}
MAX_REPEAT: Final = 65_535
"""PCRE2's largest repetition count (`{m,n}`); the engine refuses a larger one."""
_COUNT_DIGITS: Final = 5
_REPEAT: Final = re.compile(r"\{([0-9]+)(?:(,)([0-9]*))?\}")


@dataclass(frozen=True)
class PatternCost:
    """The subject's length to the power `degree`, times `paths`, bounds the steps."""

    degree: int
    paths: int
    plain: bool  # no metacharacter beyond `^ $ .`: a search


class PatternTooComplex(ValueError):
    """The pattern is exponential in its subject, or past `MAX_DEGREE` / `MAX_PATHS`."""


@dataclass
class _Group:
    done: int = 0  # paths of the alternatives already closed
    paths: int = 1  # of the alternative being read
    degree: int = 0  # unbounded quantifiers in the group, all alternatives


def _repeat(text: str, i: int) -> tuple[int | None, int | None, int]:
    """`{m}`, `{m,}`, `{m,n}` at `text[i]`: (low, high or None when unbounded, next index); a `{`
    that is no repetition is read as a literal: (None, None, i + 1). Read by one anchored match, so
    a run of `{` costs what its own digits do (a `find("}")` at each `{` was quadratic)."""
    found = _REPEAT.match(text, i)
    if found is None:
        return None, None, i + 1
    low, comma, high = found.groups()
    if len(low) > _COUNT_DIGITS or len(high or "") > _COUNT_DIGITS:  # int() past 4,300 digits fails
        raise PatternTooComplex("a repetition count over MAX_REPEAT")
    top = None if comma and not high else int(high or low)
    if max(int(low), top or 0) > MAX_REPEAT:
        raise PatternTooComplex("a repetition count over MAX_REPEAT")
    return int(low), top, found.end()


def _escape(text: str, i: int) -> int:
    """The index after the escape at `text[i]` (a backslash)."""
    c = text[i + 1 : i + 2]
    if c in _UNCOUNTED or (c.isdigit() and c != "0"):
        # work PCRE's match limit does not count, each item scanning the subject (red team my18 F2,
        # F3: `(a{0,1395})\1c` ran 3.6 s, `\Xc` over 64 KB of combining marks 3.5 s, past KILL)
        raise PatternTooComplex("a back-reference, a subroutine call or \\X")
    if c == "Q":  # literal up to `\E`
        end = text.find("\\E", i + 2)
        return len(text) if end < 0 else end + 2
    if c == "c":  # a control character: `\c)` is one character
        return i + 3
    if c and c in _BRACED and text[i + 2 : i + 3] in _NAMED:
        close = text.find(_NAMED[text[i + 2]], i + 3)
        return len(text) if close < 0 else close + 1
    if c in ("p", "P"):  # `\pL`
        return i + 3
    return i + 2


def _posix_end(text: str, j: int) -> int:
    """The index after the POSIX class (`[:alpha:]`) opened at `text[j]` (`[:`), or -1 when it is
    none: read as PCRE2 does (`check_posix_syntax`), stopping at the first `]` or `[:`, so each
    character is looked at by one such scan at most (a `find(":]")` at each `[:` was quadratic: red
    team rt26 F1, `[` + `[:` x 49,000 took 4.5 s)."""
    k, n = j + 2, len(text)
    while k + 1 < n:
        c, d = text[k], text[k + 1]
        if c == "\\" and d in "]\\":
            k += 2
            continue
        if (c == "[" and d == ":") or c == "]":
            return -1
        if c == ":" and d == "]":
            return k + 2
        k += 1
    return -1


def _class_end(text: str, i: int) -> int:
    """The index after the character class opened at `text[i]`."""
    j = i + 1
    j += text[j : j + 1] == "^"
    j += text[j : j + 1] == "]"  # a leading `]` is a member
    while j < len(text):
        if text[j] == "\\":
            j = _escape(text, j)
        elif text.startswith("[:", j) and (end := _posix_end(text, j)) >= 0:
            j = end  # `[:alpha:]`
        elif text[j] == "]":
            return j + 1
        else:
            j += 1
    return len(text)


def _group_start(text: str, i: int) -> int:
    """The index after the opening of the group at `text[i]`: `(`, `(?:`, `(?<name>`, `(?i)`..."""
    if text.startswith("(*", i):
        raise PatternTooComplex("a verb")  # (*LIMIT_MATCH=..) could raise the engine's limit
    if not text.startswith("(?", i):
        return i + 1
    j = i + 2
    c = text[j : j + 1]
    if c == "#":  # a comment, up to the first `)`
        end = text.find(")", j)
        return len(text) if end < 0 else end + 1
    if c == "P" and text[j + 1 : j + 2] == "<":
        j += 1
        c = "<"
    if c in ("<", "'") and text[j + 1 : j + 2] not in ("=", "!"):  # a named group
        close = text.find(">" if c == "<" else "'", j + 1)
        return len(text) if close < 0 else close + 1
    if c in (":", "=", "!", ">", "|"):
        return j + 1
    if c == "<":  # (?<= (?<!
        return j + 2
    if c == "(":  # a condition: read as a group inside
        return j
    if c.isdigit() or c == "P" or (c in ("R", "&", "+", "-") and not text[j + 1 : j + 2].isalpha()):
        raise PatternTooComplex("recursion or a subroutine call")
    end = j
    while end < len(text) and (text[end].isalpha() or text[end] in "-^"):
        end += 1
    if "x" in text[j:end]:
        raise PatternTooComplex("extended mode")
    return end + (end < len(text) and text[end] == ":")


_COSTS: ContextVar[dict[str, PatternCost | PatternTooComplex] | None] = ContextVar("_COSTS", default=None)


@contextmanager
def costs_read_once() -> Iterator[None]:
    """Within it each pattern is read once: a call's passes ask for the same pattern's cost several
    times (the early refusal, the match limit, the count of guarded searches). Per call, never
    across calls: a shared cache would tell one caller, by timing, another's patterns."""
    token = _COSTS.set({})
    try:
        yield
    finally:
        _COSTS.reset(token)


def pattern_cost(text: str) -> PatternCost:
    """The cost bound of a pattern, or `PatternTooComplex` (read once within `costs_read_once`).

    >>> pattern_cost("refund|chargeback")
    PatternCost(degree=1, paths=128, plain=False)
    >>> pattern_cost("[a-z]*+[0-9]")
    PatternCost(degree=2, paths=1, plain=False)
    >>> pattern_cost("(jpg|png|gif)$").paths  # three ways, each a slower group step
    192
    >>> pattern_cost("(a?){6}").paths // GROUP_STEP  # each repetition chooses again
    64
    """
    costs = _COSTS.get()
    if costs is None:
        return _read(text)
    if text not in costs:
        try:
            costs[text] = _read(text)
        except PatternTooComplex as exc:
            costs[text] = exc
    found = costs[text]
    if isinstance(found, PatternTooComplex):
        raise PatternTooComplex(*found.args)
    return found


def _read(text: str) -> PatternCost:
    """One left-to-right reading of the pattern: linear in its length."""
    plain, groups = True, False
    stack = [_Group()]
    closed: _Group | None = None  # the group just closed, None after anything else
    i = 0
    while i < len(text):
        c = text[i]
        last, closed = closed, None
        if last is not None and not (c in "*+?" or (c == "{" and _repeat(text, i)[0] is not None)):
            _quantify(stack[-1], last, 1, 1)  # a group read once
            last = None
        if c == "\\":
            plain, i = False, _escape(text, i)
            continue
        if c == "[":
            plain, i = False, _class_end(text, i)
            continue
        if c == "(":
            plain, i = False, _group_start(text, i)
            if text[i - 1 : i] == ")":  # an option setting, `(?i)`, or a comment: no group
                continue
            groups = True
            stack.append(_Group())
            continue
        if c == ")" and len(stack) > 1:
            closed = stack.pop()
            closed.done += closed.paths
        elif c == "|":  # PCRE tries each alternative at each start, uncounted (red team my18 F1)
            plain, groups = False, True
            stack[-1].done += stack[-1].paths
            stack[-1].paths = 1
        elif c in "*+?{":
            low, high, nxt = (
                (0, None, i + 1) if c in "*+" else (0, 1, i + 1) if c == "?" else _repeat(text, i)
            )
            if c == "{" and low is None:
                i += 1
                continue
            plain = False
            _quantify(stack[-1], last, low or 0, high)
            i = nxt
            i += i < len(text) and text[i] in "?+"  # lazy or possessive
            continue
        i += 1
    if closed is not None:
        _quantify(stack[-1], closed, 1, 1)
    while len(stack) > 1:  # an unclosed group: the engine refuses it anyway
        inner = stack.pop()
        inner.done += inner.paths
        _quantify(stack[-1], inner, 1, 1)
    top = stack[0]
    paths, degree = top.done + top.paths, top.degree + 1
    if degree > MAX_DEGREE or paths > MAX_PATHS:
        raise PatternTooComplex("too many quantifiers or alternatives")
    return PatternCost(degree, paths * (GROUP_STEP if groups else 1), plain)


def _quantify(into: _Group, group: _Group | None, low: int, high: int | None) -> None:
    """Add a quantified atom (`group`, or a character when None) to the alternative being read."""
    if group is None:
        if high is None:
            into.degree += 1
        else:  # `{n}` matches n characters from each start, a loop PCRE counts no step of (my18 F8)
            into.paths *= max(high, high - low + 1)
        _check(into)
        return
    if high is None:
        raise PatternTooComplex("a quantifier on a group")
    into.degree += group.degree * high
    if group.done > 1 and high > 12:  # past MAX_PATHS whatever the rest: no huge power built
        raise PatternTooComplex("too many ways through a repeated group")
    into.paths *= group.done**high * (high - low + 1)
    _check(into)


def _check(group: _Group) -> None:
    if group.degree + 1 > MAX_DEGREE or group.done + group.paths > MAX_PATHS:
        raise PatternTooComplex("too many quantifiers or alternatives")
