"""MariaDB's tokens of a stored routine body, as its lexer reads them (red team rt31 F1-F4).

An unquoted identifier is a run of `[0-9A-Za-z$_]` and any character from U+0080 up (`rt31_ok€hv`,
a no-break space inside a name, `1hv`: Python's `\\w` and `\\s` read these otherwise, which split one
name into a readable one and a word); a number is ASCII, its `0x`/`0b` prefix lower-case (`0X1F` is a
name). Only ASCII blanks separate tokens. A backquoted name (`` `` ``
inside), a string (`'...'`, `"..."`: a body stored under ANSI_QUOTES is blanked by `body_modes`) with
and without backslash escapes, a comment (`/* */`, `-- ` to the line end, `#`) are read; an
executable comment (`/*!50700 ...*/`, `/*M!...*/`) is read both as code and as a comment (the server
runs it or not by its version). Each reading gives one token list; the scanners take every reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Final, NamedTuple

__all__ = ["Token", "is_number", "readings"]

_IDENT: Final = "[0-9A-Za-z$_\u0080-\U0010ffff]+"
_QUOTED: Final = "`(?:[^`]|``)*`?"
_STRING: Final = {
    True: r"'(?:[^'\\]|\\.|'')*'?|\"(?:[^\"\\]|\\.|\"\")*\"?",  # backslash escapes (the default)
    False: r"'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?",  # NO_BACKSLASH_ESCAPES
}
_RUN: Final = r"/\*M?!\d*"  # an executable comment's opening
_COMMENT: Final = r"/\*.*?(?:\*/|$)|--(?=[\x00-\x20]|$)[^\n]*|#[^\n]*"
_BLANK: Final = "[ \t\n\r\f\v]+"
# ASCII only: `٣` (an Arabic-Indic digit) is a name to MariaDB, not a number; so are `0X1F`, `0B1`
# (its hex and bit prefixes are lower-case only; red team rt33b F4), not `1E5`
_NUMBER: Final = re.compile(r"^(?:[0-9]+|0x[0-9a-fA-F]+|0b[01]+|[0-9]+[eE][0-9]+)$", re.ASCII)


class Token(NamedTuple):
    """`kind`: 'name' (unquoted), 'quoted' (backquoted, `text` unquoted), 'string' or 'char'."""

    kind: str
    text: str


def _lexer(escapes: bool, run: bool) -> re.Pattern[str]:
    comment = _COMMENT if not run else rf"(?P<run>{_RUN})|{_COMMENT}"
    return re.compile(
        rf"(?P<blank>{_BLANK})|{comment}|(?P<quoted>{_QUOTED})|(?P<string>{_STRING[escapes]})"
        rf"|(?P<name>{_IDENT})|(?P<char>.)",
        re.DOTALL,
    )


_LEXERS: Final = {(e, r): _lexer(e, r) for e in (True, False) for r in (True, False)}


def _tokens(body: str, escapes: bool, run: bool) -> list[Token]:
    out = []
    for m in _LEXERS[(escapes, run)].finditer(body):
        if m["quoted"] is not None:
            out.append(Token("quoted", m["quoted"][1:].removesuffix("`").replace("``", "`")))
        elif m["string"] is not None:
            out.append(Token("string", m["string"]))
        elif m["name"] is not None:
            out.append(Token("name", m["name"]))
        elif m["char"] is not None:
            out.append(Token("char", m["char"]))
    return out


def readings(body: str) -> Iterator[list[Token]]:
    """Each way the server may read `body`: strings with and without backslash escapes, executable
    comments run and not.

    >>> [t.text for t in next(readings("SELECT a FROM rt€hv h, 1hv /*!50000 , `x``y` */ -- c"))]
    ['SELECT', 'a', 'FROM', 'rt€hv', 'h', ',', '1hv', ',', 'x`y', '*', '/']
    """
    yield from _readings(body)


@lru_cache(maxsize=64)
def _readings(body: str) -> tuple[list[Token], ...]:
    # a reading that cannot differ from another (no backslash, no executable comment) is left out
    escapings = (True, False) if "\\" in body else (True,)
    runs = (True, False) if "/*" in body else (True,)
    return tuple(_tokens(body, escapes, run) for escapes in escapings for run in runs)


def is_number(token: Token) -> bool:
    """Whether an unquoted word is a number literal (`1hv` is a name, `1e5` and `0x1f` are not).

    >>> [is_number(Token("name", w)) for w in ("12", "0x1F", "1E5", "1hv", "\u0663", "0X1F", "0B1")]
    [True, True, True, False, False, False, False]
    """
    return token.kind == "name" and bool(_NUMBER.match(token.text))
