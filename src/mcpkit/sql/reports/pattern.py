"""A string parameter's `pattern`: the whole value must match, and every engine reads it the same way.

Three engines see a report's pattern: the clients' JSON Schema validators (ECMA-262 regular
expressions, some with the `u` flag, some without), and the server, which validates with
pydantic's Rust `regex` engine (linear time, so no value can make it backtrack for minutes).
JSON Schema `pattern` is a search, so the schema publishes `^(?:PATTERN)$`: without the `m` flag
ECMA-262 reads `^`/`$` as the ends of the input in every engine, and so does Rust's `regex`
(unlike Python's `$`, which also matches before a final newline).

A pattern is accepted only when it means the same thing to all of them: it must compile on its
own (so no `)` or trailing `\\` can break out of the anchoring group) as ECMA-262 with and
without `u` (checked with `regress`, the Rust ECMA-262 engine) and as Rust `regex`; and escapes
are limited to those the engines agree on. `\\d`, `\\w`, `\\s` and `\\b` are refused because
ECMA-262 means ASCII by them and Rust `regex` every Unicode digit, letter or space; `\\p{..}`
and `\\u{..}` mean one thing with `u` and another without. Writing this check by hand is the
only way: no library states whether two regex dialects agree on a pattern.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Final

import regress
from pydantic import Field, TypeAdapter, ValidationError

__all__ = ["anchored", "full_match", "pattern_problem"]

_LITERAL_ESCAPES: Final = frozenset("^$\\.*+?()[]{}|/-tnrfv")
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def anchored(pattern: str) -> str:
    """The published (and enforced) form: the whole value must match.

    >>> anchored("[a-z]+")
    '^(?:[a-z]+)$'
    """
    return f"^(?:{pattern})$"


def _escape_problem(pattern: str) -> str | None:
    i = 0
    while i < len(pattern):
        if pattern[i] != "\\":
            i += 1
            continue
        nxt = pattern[i + 1 : i + 2]
        if nxt in _LITERAL_ESCAPES and nxt:
            i += 2
        elif nxt == "x" and len(pattern) >= i + 4 and set(pattern[i + 2 : i + 4]) <= _HEX:
            i += 4
        elif nxt == "u" and len(pattern) >= i + 6 and set(pattern[i + 2 : i + 6]) <= _HEX:
            i += 6
        elif nxt in ("d", "D", "w", "W", "s", "S", "b", "B"):
            hint = {"d": "[0-9]", "w": "[A-Za-z0-9_]", "s": "[ \\t]", "b": "an explicit class"}
            return (
                f"\\{nxt} matches different characters in different regex engines "
                f"(ASCII in clients, all of Unicode on the server); write {hint[nxt.lower()]} instead"
            )
        else:
            return (
                f"the escape \\{nxt} is not read the same way by every client; use a literal character, "
                "\\xHH or \\uHHHH"
            )
    return None


@lru_cache(maxsize=256)
def _server(pattern: str) -> TypeAdapter[str]:
    return TypeAdapter(Annotated[str, Field(pattern=anchored(pattern))])


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be used for a parameter, or None when every engine reads it alike.

    >>> pattern_problem("[A-Za-z0-9 ]{1,60}") is None
    True
    >>> pattern_problem("(?i)abc")
    'not a valid ECMA-262 regular expression (Invalid group modifier)'
    >>> pattern_problem("a)|(b")
    'not a valid ECMA-262 regular expression (Unbalanced parenthesis)'
    """
    for flags in ("u", ""):
        try:
            regress.Regex(pattern, flags)
        except regress.RegressError as exc:
            return f"not a valid ECMA-262 regular expression ({exc})"
    problem = _escape_problem(pattern)
    if problem:
        return problem
    try:
        _server(pattern)
    except Exception as exc:  # pydantic's SchemaError: the Rust engine refuses the construct
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return f"the server's linear-time matcher does not support it ({last.removeprefix('error: ')})"
    return None


def full_match(pattern: str, value: str) -> bool:
    """Whether the whole of `value` matches, exactly as call validation decides.

    >>> full_match("[a-z]+", "abc"), full_match("[a-z]+", "Cust.*|a"), full_match("[a-z]+", "abc\\n")
    (True, False, False)
    """
    try:
        _server(pattern).validate_python(value)
    except ValidationError:
        return False
    return True
