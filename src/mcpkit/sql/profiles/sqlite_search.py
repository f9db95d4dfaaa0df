"""SQLite's instr(), replace() and two-argument trims over UTF-8 bytes, a window at a time.

Each reads its arguments through `read(start, end)` (a copy of that many bytes) in windows of
`WINDOW` bytes plus the needle, so a call holds about a needle and a window in Python, never the
whole text as `str` (4 bytes a character once one is astral). Results are SQLite's, byte for byte:
replace() matches bytes left to right without overlap; instr() of text compares at the first byte
and at every byte that does not continue a UTF-8 sequence, and counts those; a trim removes
characters of the set (read up to its first NUL) from the ends. `check()` raises once the call is
past its deadline; `Unsupported` means SQLite's own answer is not computed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["WINDOW", "Unsupported", "instr", "replace_windows", "replaced", "trim_span"]

WINDOW: Final = 1 << 20
Read = Callable[[int, int], bytes]
Needle = bytes | memoryview  # a needle or pattern may be a view of SQLite's memory
Check = Callable[[], None]
_CONTINUATION: Final = bytes(range(0x80, 0xC0))
_SHORT_SET: Final = 16  # members a chunk's str.strip may take: at most 16 compares per character
_SMALL_SET: Final = 1 << 16  # a set of more bytes is searched, then kept as a table of code points
_SET_SEARCH: Final = 1 << 27  # bytes of set searched before the table is built
_SCAN_CHECK: Final = 0xFFFF


class Unsupported(Exception):
    """An argument this module does not read as SQLite would (a set that is not UTF-8)."""


def _continues(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def instr(read: Read, size: int, needle: Needle, is_text: bool, check: Check) -> int:
    """SQLite's instr(): the 1-based position of `needle` (characters for text, bytes for blobs)."""
    m = len(needle)
    if m == 0:
        return 1
    if m > size:
        return 0
    if is_text and _continues(needle[0]):  # SQLite compares such a needle at the first byte only
        return 1 if read(0, m) == needle else 0
    at = -1
    for pos in range(0, size - m + 1, WINDOW):
        check()
        found = read(pos, pos + WINDOW + m - 1).find(needle)
        if found >= 0:
            at = pos + found
            break
    if at < 0:
        return 0
    if not is_text:
        return at + 1
    # positions SQLite compared before `at`: the first byte, and every other that starts a character
    before = 1 if at > 0 and _continues(read(0, 1)[0]) else 0
    for pos in range(0, at, WINDOW):
        check()
        chunk = read(pos, min(at, pos + WINDOW))
        before += len(chunk.translate(None, _CONTINUATION))
    return before + 1


def replace_windows(read: Read, size: int, old: Needle, check: Check) -> tuple[list[tuple[int, int]], int]:
    """Cut the text into windows no match of `old` crosses, as replace()'s left-to-right scan finds
    them; returns the windows and the number of matches (`old` is not empty)."""
    m = len(old)
    windows: list[tuple[int, int]] = []
    hits_total = 0
    pos = 0
    while pos < size:
        check()
        window = read(pos, min(size, pos + WINDOW) + m - 1)
        cut = min(size - pos, WINDOW)
        hits = window.count(old, 0, cut)
        crossing = window.find(old, max(0, cut - m + 1))
        if 0 <= crossing < cut:
            # Where the scan stands after its last match before the cut: counting up to any point
            # past that match's end gives `hits`. A match there ends after cut - 2m (else the one
            # at `crossing` would be a further match before the cut).
            low = max(0, cut - 2 * m)
            if window.count(old, 0, low) != hits:
                high = cut
                while low + 1 < high:
                    mid = (low + high) // 2
                    if window.count(old, 0, mid) == hits:
                        high = mid
                    else:
                        low = mid
                low = high
            following = window.find(old, low)
            if 0 <= following < cut:  # the scan's next match crosses the cut: take it in
                cut, hits = following + m, hits + 1
        windows.append((pos, pos + cut))
        hits_total += hits
        pos += cut
    return windows, hits_total


def replaced(
    read: Read, windows: list[tuple[int, int]], old: Needle, new: Needle, check: Check
) -> Iterator[bytes]:
    """The result of replace(), a window at a time."""
    for start, end in windows:
        check()
        yield read(start, end).replace(old, new)


def _members(read: Read, size: int, check: Check) -> Callable[[str], bool]:
    """Membership in a trim's character set (up to its first NUL, as SQLite reads it)."""
    if size <= _SMALL_SET:
        chars = read(0, size).split(b"\0", 1)[0]
        try:
            members = frozenset(chars.decode("utf-8"))
        except UnicodeDecodeError:
            raise Unsupported("a character set that is not UTF-8") from None
        return members.__contains__
    return _LargeSet(read, size, check).__contains__


class _LargeSet:
    """A long set: each character looked up by a search of the set's bytes (a valid UTF-8 character
    matches only where one starts), until the searches would cost more than a table of code points."""

    def __init__(self, read: Read, size: int, check: Check) -> None:
        self.read, self.size, self.check = read, size, check
        self.searched = 0
        self.table: bytearray | None = None
        self.end = self._scan(None)  # checks that the set is UTF-8 up to its first NUL

    def _scan(self, table: bytearray | None) -> int:
        pos = 0
        while pos < self.size:
            self.check()
            chunk = self.read(pos, pos + WINDOW + 1)
            nul = chunk.find(b"\0")
            end = nul if nul >= 0 else _cut(chunk, WINDOW)
            try:
                text = chunk[:end].decode("utf-8")
            except UnicodeDecodeError:
                raise Unsupported("a character set that is not UTF-8") from None
            if table is not None:
                for char in set(text):
                    table[ord(char)] = 1
            pos += end
            if nul >= 0:
                break
        return pos

    def __contains__(self, char: str) -> bool:
        if "\udc80" <= char <= "\udcff":  # a byte that is not UTF-8 (surrogateescape): never a member
            return False
        if self.table is None and self.searched + self.end > _SET_SEARCH:
            self.table = bytearray(0x110000)
            self._scan(self.table)
        if self.table is not None:
            return self.table[ord(char)] == 1
        self.searched += self.end
        needle = char.encode("utf-8", "surrogateescape")
        for pos in range(0, self.end, WINDOW):
            self.check()
            if self.read(pos, min(self.end, pos + WINDOW + len(needle) - 1)).find(needle) >= 0:
                return True
        return False


def _cut(chunk: bytes, want: int) -> int:
    """A cut at most 3 bytes before `want` that splits no UTF-8 character (`chunk` holds the byte at
    `want`): before a byte that starts one, or at `want` if that byte is in none (4 continuations)."""
    if want >= len(chunk):
        return len(chunk)
    for cut in range(want, max(0, want - 4), -1):
        if not _continues(chunk[cut]):
            return cut
    return want


def _leading(text: str, member: Callable[[str], bool], from_end: bool, check: Check) -> int:
    """How many characters at the start (or end) of `text` are members."""
    present = [char for char in set(text) if member(char)]
    if not present:
        return 0
    if len(present) <= _SHORT_SET:
        chars = "".join(present)
        return len(text) - len(text.rstrip(chars) if from_end else text.lstrip(chars))
    members = frozenset(present)
    n = 0
    order = reversed(text) if from_end else iter(text)
    for char in order:
        if char not in members:
            break
        n += 1
        if not n & _SCAN_CHECK:
            check()
    return n


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def trim_span(
    read: Read, size: int, chars: tuple[Read, int], left: bool, right: bool, check: Check
) -> tuple[int, int]:
    """The bytes `start`, `end` of the text that trim/ltrim/rtrim(text, chars) keeps."""
    if chars[1] == 0 or chars[0](0, 1) == b"\0":
        return 0, size
    try:
        member = _members(*chars, check)
    except Unsupported:
        return _byte_trim_span(read, size, chars, left, right, check)
    start, end = 0, size
    # Undecodable bytes become lone surrogates, never members: SQLite stops at them too.
    while left and start < end:
        check()
        chunk = read(start, min(end, start + WINDOW + 1))
        cut = _cut(chunk, WINDOW)
        text = chunk[:cut].decode("utf-8", "surrogateescape")
        kept = _leading(text, member, False, check)
        if kept < len(text):
            start += _utf8_len(text[:kept])
            break
        start += cut
    while right and end > start:
        check()
        begin = max(start, end - WINDOW)
        chunk = read(begin, end)
        cut = 0  # `start` begins a character; else the first that starts in 4 bytes (WINDOW > 4)
        if begin > start:
            cut = next((i for i in range(4) if not _continues(chunk[i])), 3)
        text = chunk[cut:].decode("utf-8", "surrogateescape")
        kept = _leading(text, member, True, check)
        if kept < len(text):
            end -= _utf8_len(text[len(text) - kept :])
            break
        end = begin + cut
    return start, end


_BYTE_SET: Final = 1 << 16  # bytes of a set that is not UTF-8 read as SQLite's byte sequences


def _byte_chars(chars: tuple[Read, int]) -> dict[tuple[int, bytes], int]:
    """A set that is not UTF-8 as SQLite's trim reads it: up to its first NUL, cut where a byte below
    0xC0 or a lead byte and its continuations end (SQLITE_SKIP_UTF8); each by (length mod 256, as
    SQLite keeps it in a byte; its first that many bytes) to its first place in the set."""
    data = chars[0](0, min(chars[1], _BYTE_SET + 1)).split(b"\0", 1)[0]
    if len(data) > _BYTE_SET:
        raise Unsupported("a long character set that is not UTF-8")
    found: dict[tuple[int, bytes], int] = {}
    at = 0
    while at < len(data):
        end = at + 1
        if data[at] >= 0xC0:
            while end < len(data) and _continues(data[end]):
                end += 1
        kept = (end - at) % 256
        if kept == 0:  # SQLite would match it everywhere without moving: it never ends
            raise Unsupported("a character set SQLite cannot trim with")
        found.setdefault((kept, data[at : at + kept]), len(found))
        at = end
    return found


def _byte_trim_span(
    read: Read, size: int, chars: tuple[Read, int], left: bool, right: bool, check: Check
) -> tuple[int, int]:
    """trim_span for a set that is not UTF-8, as SQLite's trimFunc: at each end, the first character
    of the set whose bytes the text has there is removed, until none is."""
    found = _byte_chars(chars)
    lengths = sorted({n for n, _ in found})
    longest = lengths[-1] if lengths else 0
    start, end, steps = 0, size, 0

    def first(window: bytes, at: int, room: int, backwards: bool) -> int:
        best, cut = len(found), 0
        for n in lengths:
            if n <= room:
                piece = window[at - n : at] if backwards else window[at : at + n]
                place = found.get((n, piece), best)
                if place < best:
                    best, cut = place, n
        return cut

    while left and start < end:
        window, base = read(start, min(end, start + WINDOW + longest)), start
        while start < end and start - base < WINDOW:
            cut = first(window, start - base, end - start, False)
            if not cut:
                return _right_bytes(read, start, end, right, first, longest, check) if right else (start, end)
            start, steps = start + cut, steps + 1
            if not steps & _SCAN_CHECK:
                check()
        check()
    return _right_bytes(read, start, end, right, first, longest, check)


def _right_bytes(
    read: Read,
    start: int,
    end: int,
    right: bool,
    first: Callable[[bytes, int, int, bool], int],
    longest: int,
    check: Check,
) -> tuple[int, int]:
    steps = 0
    while right and end > start:
        base = max(start, end - WINDOW - longest)
        window, top = read(base, end), end
        while end > start and top - end < WINDOW:
            cut = first(window, end - base, end - start, True)
            if not cut:
                return start, end
            end, steps = end - cut, steps + 1
            if not steps & _SCAN_CHECK:
                check()
        check()
    return start, end
