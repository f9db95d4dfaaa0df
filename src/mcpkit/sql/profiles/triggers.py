"""Row triggers on a table with masked columns: start-up warnings, not refusals.

A trigger body may copy a masked value into another column or table (`NEW.copy := NEW.email`, an
AFTER audit trigger inserting `to_jsonb(NEW)` into `members_audit`): mcpkit cannot tell what it
copies, and refusing would stop every table with an `updated_at` trigger, so start-up logs and
`doctor --mask` prints one line per trigger, naming the tables its body writes where the body is
readable; the operator masks what it copies (red team mask17 F2). PostgreSQL's rewrite rules
(`CREATE RULE ... ON INSERT ... DO ALSO INSERT INTO log VALUES (NEW.email)`) do the same job and are
named the same way (red team rt19mask F3). Each engine's profile lists its triggers and rules
(`Profile.trigger_hints`); the text is read here.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["rule_hint", "trigger_hint", "written_tables"]

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


def _writes(body: str | None, table: str) -> str:
    if body is None:
        return "its body is not readable here"
    tables = [t for t in written_tables(body, table) if t]  # a rule ('') assigns no NEW column
    return f"it writes {', '.join(tables)}" if tables else "no table it writes was recognised"


def trigger_hint(table: str, trigger: str, timing: str, body: str | None) -> str:
    """One warning line for row trigger `trigger` (`timing`: BEFORE, AFTER, INSTEAD OF) on `table`."""
    return (
        f"table {table} has masked columns and {timing} row trigger {trigger} ({_writes(body, table)}), "
        "which may copy a masked value into another column or table: mcpkit cannot tell which; mask "
        "what it copies too (see docs/masking.md)"
    )


def rule_hint(table: str, rule: str, event: str, actions: str) -> str:
    """One warning line for rewrite rule `rule` on `event` (INSERT, UPDATE, ...) of `table`, whose
    actions (the text after the rule's DO) are `actions`.

    >>> rule_hint("src", "copy", "INSERT", "INSERT INTO log (id, email) VALUES (new.id, new.email);")[:60]
    'table src has masked columns and rule copy (ON INSERT; it wr'
    """
    return (
        f"table {table} has masked columns and rule {rule} (ON {event}; {_writes(actions, '')}), which "
        "may copy a masked value into another column or table: mcpkit cannot tell which; mask what it "
        "copies too (see docs/masking.md)"
    )
