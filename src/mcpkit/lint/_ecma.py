"""ECMA-262 regular expressions, as clients compile a schema's `pattern`: `new RegExp(p, "u")`.

Uses the `regress` package (Python bindings to the Rust `regress` crate, an ECMA-262 engine with
the `u` flag's syntax), so the linter needs no JavaScript runtime. Python's `re` is the wrong
judge: it accepts `(?i)` and `(?P<name>...)`, which throw in JavaScript, and rejects `\\p{L}`, which
JavaScript accepts.
"""

from __future__ import annotations

import functools

import regress

#: Python spellings with an ECMA-262 equivalent, for the message.
_HINTS = (
    ("(?P<", "named groups are (?<name>...) in ECMA-262, not Python's (?P<name>...)"),
    ("(?P=", "back-references are \\k<name> in ECMA-262, not (?P=name)"),
    ("(?i)", "ECMA-262 has no inline flags such as (?i); spell both cases: [Aa]"),
    ("(?s)", "ECMA-262 has no inline flags such as (?s); use [\\s\\S]"),
    ("(?m)", "ECMA-262 has no inline flags such as (?m)"),
    ("(?x)", "ECMA-262 has no inline flags such as (?x)"),
    ("\\A", "\\A is Python; ECMA-262 uses ^"),
    ("\\Z", "\\Z is Python; ECMA-262 uses $"),
)


@functools.lru_cache(maxsize=4096)
def ecma_error(pattern: str) -> str | None:
    """Why `new RegExp(pattern, "u")` would throw, or `None` when it compiles.

    >>> ecma_error("^[a-z]+$") is None, ecma_error("(?i)abc") is not None
    (True, True)
    """
    try:
        regress.Regex(pattern, "u")
    except regress.RegressError as exc:
        reason = str(exc) or "invalid"
        hint = next((text for marker, text in _HINTS if marker in pattern), None)
        return f"{reason}; {hint}" if hint else reason
    except (ValueError, TypeError) as exc:  # e.g. a NUL or lone surrogate the bindings refuse
        return str(exc) or "invalid"
    return None
