"""Row triggers on a table with masked columns: start-up warnings, not refusals.

A trigger body may copy a masked value into another column or table (`NEW.copy := NEW.email`, an
AFTER audit trigger inserting `to_jsonb(NEW)` into `members_audit`): mcpkit cannot tell what it
copies, and refusing would stop every table with an `updated_at` trigger, so start-up logs and
`doctor --mask` prints one line per trigger, naming the tables its body writes where the body is
readable; the operator masks what it copies (red team mask17 F2). Each engine's profile lists its
triggers (`Profile.trigger_hints`); the text is read here.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["trigger_hint", "written_tables"]

_NAME: Final = r"(?:`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|\[[^\]]+\]|[\w$]+)"
_WRITE: Final = re.compile(
    rf"\b(?:insert\s+(?:or\s+\w+\s+)?into|replace\s+into|update(?:\s+or\s+\w+)?|merge\s+into)"
    rf"\s+(?:only\s+)?({_NAME}(?:\s*\.\s*{_NAME})?)",
    re.IGNORECASE,
)
# An assignment to the row being written: plpgsql `NEW.x := ...`, MariaDB `SET NEW.x = ...`.
_NEW_ROW: Final = re.compile(r"\bnew\s*\.\s*[\w$`\"]+\s*:?=(?!=)", re.IGNORECASE)
_KEYWORDS: Final = frozenset({"set", "on", "of", "where"})


def written_tables(body: str, own: str) -> list[str]:
    """The tables a trigger body writes, in order (`own`, the trigger's table, for an assignment
    to NEW).

    >>> written_tables("BEGIN INSERT INTO audit(row) VALUES (to_jsonb(NEW)); RETURN NEW; END", "m")
    ['audit']
    >>> written_tables("SET NEW.email_copy = NEW.email", "members")
    ['members']
    """
    found = [own] if _NEW_ROW.search(body) else []
    for m in _WRITE.finditer(body):
        name = re.sub(r"\s+", "", m[1])
        if name.casefold() not in _KEYWORDS and name not in found:
            found.append(name)
    return found


def trigger_hint(table: str, trigger: str, timing: str, body: str | None) -> str:
    """One warning line for row trigger `trigger` (`timing`: BEFORE, AFTER, INSTEAD OF) on `table`."""
    if body is None:
        writes = "its body is not readable here"
    else:
        tables = written_tables(body, table)
        writes = f"it writes {', '.join(tables)}" if tables else "no table it writes was recognised"
    return (
        f"table {table} has masked columns and {timing} row trigger {trigger} ({writes}), which may copy "
        "a masked value into another column or table: mcpkit cannot tell which; mask what it copies "
        "too (see docs/masking.md)"
    )
