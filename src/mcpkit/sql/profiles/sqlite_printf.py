"""Where SQLite's printf() takes its widths and precisions from, for `sqlite_text`'s bounded printf.

A port of the spec loop of `sqlite3_str_vappendf` (SQLite's printf.c, 3.38 and later): flags, then
a width (digits or `*`), then `.` and a precision (digits or `*`), then `l`/`ll`, then the
conversion. With an argument list (the SQL function), each `*` reads the next argument, each
conversion but `%%` and `%n` reads one, and an unknown conversion ends the output. A string
conversion's precision (`%.*s`, `%.5q`) is a most, not a size: SQLite reads at most that many of
the argument's characters and allocates nothing for it, so it does not count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

__all__ = ["spec_sizes"]

_FLAGS: Final = frozenset("-+ #!0,")
_ONE_ARGUMENT: Final = frozenset("dsgzqQwcouxXfeEGipr")
_NO_ARGUMENT: Final = frozenset("n%")
_STRINGS: Final = frozenset("szqQw")  # their precision caps what is copied from the argument
_STAR: Final = -1  # the next argument is a width or precision
_VALUE: Final = -2  # the next argument is a conversion's value
_STOP: Final = -3  # SQLite stops here (an unknown conversion)
_NONE: Final = -4  # a conversion that reads no argument (`%%`, `%n`)
_PRECISION: Final = "p"
_WIDTH: Final = "w"
_CHECK_EVERY: Final = 1 << 16  # specs between deadline checks (32 MiB of `%` is ~5 s of Python)
_DIGITS: Final = 12  # more digits than this are over any limit (and int() of 4,300+ digits fails)


def _walk(text: str, stop: Callable[[], bool]) -> Iterator[tuple[str, int]]:
    """Literal widths/precisions (>= 0) and what each argument is read as, in order.

    Each event is a pair: widths and precisions carry `_WIDTH` / `_PRECISION`; a conversion carries
    its letter, with `_VALUE` when it reads an argument and `_NONE` when not; `("", _STOP)` ends.
    """
    n = len(text)
    specs = 0

    def at(k: int) -> str:
        return text[k] if k < n else "\0"

    def number(start: int, end: int) -> int:
        return int(text[start:end] or "0") if end - start <= _DIGITS else 10**_DIGITS

    i = 0
    while i < n:
        if text[i] != "%":
            i = text.find("%", i)
            if i < 0:
                return
        i += 1
        if i >= n:
            return  # a trailing `%` is printed as is
        specs += 1
        if specs % _CHECK_EVERY == 0 and stop():
            raise TimeoutError("printf format read past the call's deadline")
        c = text[i]
        while True:
            done = False
            if c in _FLAGS:
                pass
            elif c == "l":
                i += 1
                c = at(i)
                if c == "l":
                    i += 1
                    c = at(i)
                done = True
            elif "1" <= c <= "9":
                start = i
                i += 1
                while "0" <= at(i) <= "9":
                    i += 1
                yield _WIDTH, number(start, i)
                c = at(i)
                if c not in ".l":
                    done = True
                else:
                    i -= 1
            elif c == "*":
                yield _WIDTH, _STAR
                if at(i + 1) not in ".l":
                    i += 1
                    c = at(i)
                    done = True
            elif c == ".":
                i += 1
                c = at(i)
                if c == "*":
                    yield _PRECISION, _STAR
                    i += 1
                    c = at(i)
                else:
                    start = i
                    while "0" <= c <= "9":
                        i += 1
                        c = at(i)
                    yield _PRECISION, number(start, i)
                if c == "l":
                    i -= 1
                else:
                    done = True
            else:
                done = True
            if done:
                break
            i += 1
            c = at(i)
            if c == "\0":
                break
        if c in _ONE_ARGUMENT:
            yield c, _VALUE
        elif c in _NO_ARGUMENT:
            yield c, _NONE
        else:
            yield "", _STOP
            return
        i += 1


def spec_sizes(
    fmt: Any,
    args: Sequence[Any],
    as_int: Callable[[list[Any]], list[int]],
    most: int,
    stop: Callable[[], bool] = lambda: False,
) -> list[int]:
    """Each width and precision `printf(fmt, *args)` uses, as SQLite reads it.

    `as_int` converts `*` arguments as SQLite does (`sqlite3_value_int64`); a size past `most` counts
    as `most + 1` (SQLite narrows it to 32 bits first, which can only make it smaller). After an
    unknown conversion every argument left counts as a size: SQLite stops there today, a later
    SQLite might read on. `stop` (the call's deadline) is asked every 65,536 specs.
    """
    if isinstance(fmt, bytes):
        fmt = fmt.decode("utf-8", "replace")  # SQLite reads the bytes as text; `%` is ASCII
    if not isinstance(fmt, str):
        return []  # a number's text has no `%`; NULL prints nothing
    sizes: list[int] = []
    stars: list[Any] = []
    precision: list[int] = []  # the spec's precision: a literal, or an argument in `held`
    held: list[Any] = []
    used = 0
    for kind, event in _walk(fmt.split("\0", 1)[0], stop):
        into_sizes, into_stars = (precision, held) if kind == _PRECISION else (sizes, stars)
        if event >= 0:
            into_sizes.append(min(event, most + 1))
        elif event == _STAR:
            if used < len(args):  # past the last argument SQLite reads 0
                into_stars.append(args[used])
                used += 1
        elif event == _STOP:
            stars += [*held, *args[used:]]
            sizes += precision
            break
        else:  # a conversion ends the spec
            if kind not in _STRINGS:
                sizes += precision
                stars += held
            precision, held = [], []
            if event == _VALUE:
                used += 1
    return sizes + [min(abs(v), most + 1) for v in as_int(stars)]
