"""Where SQLite's printf() takes its widths and precisions from, for `sqlite_text`'s bounded printf.

A port of the spec loop of `sqlite3_str_vappendf` (SQLite's printf.c, 3.38 and later): flags, then
a width (digits or `*`), then `.` and a precision (digits or `*`), then `l`/`ll`, then the
conversion. With an argument list (the SQL function), each `*` reads the next argument, each
conversion but `%%` and `%n` reads one, and an unknown conversion ends the output. A string
conversion's precision (`%.*s`, `%.5q`) is a most, not a size: SQLite reads at most that many of
the argument's characters and allocates nothing for it, so it does not count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

__all__ = ["MOST_SPECS", "Buffer", "spec_total"]

Buffer = bytes | memoryview
"""A format's UTF-8 bytes: `bytes`, or a read-only view of SQLite's memory (format "B")."""

_FLAGS: Final = frozenset(b"-+ #!0,")
_ONE_ARGUMENT: Final = frozenset(b"dsgzqQwcouxXfeEGipr")
_NO_ARGUMENT: Final = frozenset(b"n%")
_PERCENT, _STAR_SIGN, _DOT, _L, _ONE, _NINE = b"%*.l19"
_PERCENT_SIGN: Final = re.compile(b"%")
_DIGIT_RUN: Final = re.compile(b"[0-9]+")
_END: Final = re.compile(b"\0")
_STRINGS: Final = frozenset("szqQw")  # their precision caps what is copied from the argument
_STAR: Final = -1  # the next argument is a width or precision
_VALUE: Final = -2  # the next argument is a conversion's value
_STOP: Final = -3  # SQLite stops here (an unknown conversion)
_NONE: Final = -4  # a conversion that reads no argument (`%%`, `%n`)
_PRECISION: Final = "p"
_WIDTH: Final = "w"
_CHECK_EVERY: Final = (
    1 << 16
)  # specs (or characters of one spec) between deadline checks (32 MiB of `%` is ~5 s of Python)
_DIGITS: Final = 12  # more digits than this are over any limit (and int() of 4,300+ digits fails)
MOST_SPECS: Final = 1 << 16
"""More conversions than this in one format count as over the length limit: the format is read in
Python (about 66,000 specs a second, holding the GIL), and no analyst writes 65,536 of them."""


def _walk(text: Buffer, n: int, stop: Callable[[], bool]) -> Iterator[tuple[str, int]]:
    """Literal widths/precisions (>= 0) and what each argument is read as, in order.

    `text` is the format's UTF-8 bytes (read in place: SQLite's own memory), its first `n` bytes
    used. Each event is a pair: widths and precisions carry `_WIDTH` / `_PRECISION`; a conversion
    carries its letter, with `_VALUE` when it reads an argument and `_NONE` when not; `("", _STOP)` ends.
    """
    specs = 0
    steps = 0

    def at(k: int) -> int:
        return text[k] if k < n else 0

    def number(start: int, end: int) -> int:
        return int(bytes(text[start:end]) or b"0") if end - start <= _DIGITS else 10**_DIGITS

    def digits(k: int) -> int:  # the end of the run of digits at `k` (a run may be megabytes long)
        match = _DIGIT_RUN.match(text, k, n)
        return match.end() if match else k

    i = 0
    while i < n:
        if text[i] != _PERCENT:
            found = _PERCENT_SIGN.search(text, i, n)
            if found is None:
                return
            i = found.start()
        i += 1
        if i >= n:
            return  # a trailing `%` is printed as is
        specs += 1
        if specs % _CHECK_EVERY == 0 and stop():
            raise TimeoutError("printf format read past the call's deadline")
        c = text[i]
        while True:
            steps += 1
            if steps % _CHECK_EVERY == 0 and stop():  # a spec of a million flags
                raise TimeoutError("printf format read past the call's deadline")
            done = False
            if c in _FLAGS:
                pass
            elif c == _L:
                i += 1
                c = at(i)
                if c == _L:
                    i += 1
                    c = at(i)
                done = True
            elif _ONE <= c <= _NINE:
                start = i
                i = digits(i + 1)
                yield _WIDTH, number(start, i)
                c = at(i)
                if c not in (_DOT, _L):
                    done = True
                else:
                    i -= 1
            elif c == _STAR_SIGN:
                yield _WIDTH, _STAR
                if at(i + 1) not in (_DOT, _L):
                    i += 1
                    c = at(i)
                    done = True
            elif c == _DOT:
                i += 1
                c = at(i)
                if c == _STAR_SIGN:
                    yield _PRECISION, _STAR
                    i += 1
                    c = at(i)
                else:
                    start = i
                    i = digits(i)
                    c = at(i)
                    yield _PRECISION, number(start, i)
                if c == _L:
                    i -= 1
                else:
                    done = True
            else:
                done = True
            if done:
                break
            i += 1
            c = at(i)
            if c == 0:
                break
        if c in _ONE_ARGUMENT:
            yield chr(c), _VALUE
        elif c in _NO_ARGUMENT:
            yield chr(c), _NONE
        else:
            yield "", _STOP
            return
        i += 1


def spec_total(
    fmt: Buffer,
    args: Sequence[Any],
    as_int: Callable[[list[Any]], list[int]],
    most: int,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """The sum of the widths and precisions `printf(fmt, *args)` uses, as SQLite reads them.

    `fmt` is the format's bytes as SQLite reads them (`sqlite3_value_text`: up to the first NUL);
    `as_int` converts `*` arguments as SQLite does (`sqlite3_value_int64`); a size past `most` counts
    as `most + 1` (SQLite narrows it to 32 bits first, which can only make it smaller). After an
    unknown conversion every argument left counts as a size: SQLite stops there today, a later
    SQLite might read on. The sum is kept as it goes and the reading stops once it is past `most`,
    or past `MOST_SPECS` conversions (then `most + 1`): memory stays constant whatever the format
    (a list of sizes held 13 million entries, 200 MB, for a 32 MB format of `%1.1d`: red team
    rt19lite F1). `stop` (the call's deadline) is asked every 65,536 specs.
    """
    nul = _END.search(fmt)
    n = nul.start() if nul else len(fmt)
    total = 0
    specs = 0
    stars: list[Any] = []  # at most one per argument
    precision = 0  # the spec's literal precision
    held: list[Any] = []  # the spec's `*` precision, an argument
    used = 0
    for kind, event in _walk(fmt, n, stop):
        if event >= 0:
            size = min(event, most + 1)
            if kind == _PRECISION:
                precision += size
            else:
                total += size
        elif event == _STAR:
            if used < len(args):  # past the last argument SQLite reads 0
                (held if kind == _PRECISION else stars).append(args[used])
                used += 1
        elif event == _STOP:
            stars += [*held, *args[used:]]
            total += precision
            break
        else:  # a conversion ends the spec
            specs += 1
            if kind not in _STRINGS:
                total += precision
                stars += held
            precision, held = 0, []
            if event == _VALUE:
                used += 1
        if total > most or specs > MOST_SPECS:
            return most + 1
    return total + sum(min(abs(v), most + 1) for v in as_int(stars))
