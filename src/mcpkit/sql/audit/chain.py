"""The hash chain over audit entries: each entry's hash covers its text and the hash before it.

    hash(n) = SHA-256( hash(n-1) + "\\n" + text(n) )      hash(0) = 64 zeros

`text` is the entry as canonical JSON (sorted keys, ASCII only, no spaces), stored verbatim, so
the chain is recomputed from exactly what is in the store. Removing, changing or reordering any
entry breaks every link after it; what a chain alone cannot show is the removal of the newest
entries, which is what an anchor (a `seq:hash` kept somewhere else) is for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["GENESIS", "Anchor", "ChainRow", "canonical", "link", "parse_anchor", "verify_chain"]

GENESIS: Final = "0" * 64


def canonical(entry: dict[str, Any]) -> str:
    """The one text of an entry that is stored and hashed.

    >>> canonical({"b": 1, "a": "\\u202e"})
    '{"a":"\\\\u202e","b":1}'
    """
    return json.dumps(entry, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


def link(prev: str, text: str) -> str:
    """The hash of an entry whose predecessor's hash is `prev`."""
    return hashlib.sha256(f"{prev}\n{text}".encode()).hexdigest()


@dataclass(frozen=True)
class ChainRow:
    """One stored entry as the chain sees it."""

    seq: int
    prev: str
    hash: str
    text: str


@dataclass(frozen=True)
class Anchor:
    """A position of the chain recorded elsewhere: entry `seq` had hash `hash`."""

    seq: int
    hash: str

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash}"


def parse_anchor(text: str) -> Anchor:
    """`SEQ:HASH`, as `mcpkit audit --head` prints it.

    >>> parse_anchor("12:" + "ab" * 32).seq
    12

    Raises:
        ValueError: not that form.
    """
    seq, _, digest = text.strip().partition(":")
    if not seq.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError("an anchor is SEQ:HASH as `mcpkit audit --head` prints it (64 hex digits)")
    return Anchor(int(seq), digest)


def verify_chain(rows: Iterable[ChainRow], anchors: Iterable[Anchor] = ()) -> tuple[int, list[str]]:
    """Walk the entries in `seq` order; the count and every problem found (empty when intact).

    >>> a = ChainRow(1, GENESIS, link(GENESIS, "{}"), "{}")
    >>> verify_chain([a])
    (1, [])
    >>> verify_chain([ChainRow(2, a.hash, link(a.hash, "{}"), "{}")])[1]
    ['entry 2: the chain does not start at entry 1 (entries 1-1 are missing)']
    """
    problems: list[str] = []
    expected_seq, expected_prev = 1, GENESIS
    count = 0
    seen: dict[int, str] = {}
    for row in rows:
        count += 1
        if row.seq != expected_seq:
            what = "start at entry 1" if expected_seq == 1 else f"continue at entry {expected_seq}"
            gap = f" (entries {expected_seq}-{row.seq - 1} are missing)" if row.seq > expected_seq else ""
            problems.append(f"entry {row.seq}: the chain does not {what}{gap}")
        elif row.prev != expected_prev:
            problems.append(f"entry {row.seq}: its predecessor's hash does not match (removed or changed)")
        if link(row.prev, row.text) != row.hash:
            problems.append(f"entry {row.seq}: its content does not match its hash (changed)")
        seen[row.seq] = row.hash
        expected_seq, expected_prev = row.seq + 1, row.hash
    for anchor in anchors:
        found = seen.get(anchor.seq)
        if found is None:
            problems.append(
                f"anchor {anchor.seq}: the entry is missing (the log was cut back to {expected_seq - 1})"
            )
        elif found != anchor.hash:
            problems.append(f"anchor {anchor.seq}: the entry's hash differs (the log was rewritten)")
    return count, problems
