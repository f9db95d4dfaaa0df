"""The text view of the audit: one line per call, and nothing a caller sent can forge or garble it.

Every cell is escaped before it is laid out: the C0 and C1 control characters (newline, carriage
return, ESC, ...), DEL, the Unicode format characters (bidi overrides and isolates, zero-width
characters, BOM), line and paragraph separators and lone surrogates are shown as `\\n`, `\\x1b`,
`\\u202e`; a backslash as `\\\\`, so an escape can never be mistaken for what a caller typed. A tool
name with a newline in it is one cell on one line, not a second, invented row.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Final

from mcpkit.sql.audit.record import AuditRecord

__all__ = ["COLUMNS", "escape_text", "render_table"]

COLUMNS: Final = ("at", "call_id", "caller", "tool", "outcome", "rows", "ms", "reason", "sql")
_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_UNSAFE: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_WIDTHS: Final = {"call_id": 12, "caller": 32, "tool": 40, "outcome": 14, "reason": 32}
_SQL_WIDTH: Final = 60


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    if unicodedata.category(ch) not in _UNSAFE:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_text(text: str) -> str:
    """`text` with every character that could move the cursor, reorder or hide text made visible.

    >>> escape_text("a\\nb\\x1b[2J\\u202egnp.exe\\\\")
    'a\\\\nb\\\\x1b[2J\\\\u202egnp.exe\\\\\\\\'
    """
    return "".join(_escape(ch) for ch in text)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _cells(r: AuditRecord, wide: bool) -> list[str]:
    # the principal when authenticated; else what the client calls itself (unverified) and the
    # connection the limits are keyed on
    client = f"{r.client_name}/{r.client_version}" if r.client_name else ""
    caller = r.principal or " ".join(part for part in (client, r.identity or "") if part)
    sql = r.sql or r.statement or ""  # newlines escaped, not folded: `-- x\nDROP` must not read as a comment
    cells = {
        "at": r.at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-4] + "Z",
        "call_id": r.call_id,
        "caller": caller,
        "tool": r.tool,
        "outcome": r.outcome,
        "rows": "" if r.rows is None else f"{r.rows}{'+' if r.truncated else ''}",
        "ms": "" if r.duration_ms is None else f"{r.duration_ms:.1f}",
        "reason": r.reason or "",
        "sql": sql,
    }
    out = []
    for name in COLUMNS:
        text = escape_text(str(cells[name]))
        width = _SQL_WIDTH if name == "sql" else _WIDTHS.get(name)
        out.append(text if wide or width is None else _clip(text, width))
    return out


def render_table(records: Sequence[AuditRecord], *, wide: bool = False) -> str:
    """Records as an aligned text table, one line per call (`N+` rows: more rows existed).

    The sql column shows the SQL sent, or the statement asked for when nothing was sent (a refusal);
    it is clipped to 60 characters unless `wide`.
    """
    rows = [list(COLUMNS), *(_cells(r, wide) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)
