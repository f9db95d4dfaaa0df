"""The text view of the audit: one line per call, and nothing a caller sent can forge or garble it.

Every cell is escaped before it is laid out: the C0 and C1 control characters (newline, carriage
return, ESC, ...), DEL, the Unicode format characters (bidi overrides and isolates, zero-width
characters, BOM), line and paragraph separators, lone surrogates, every space other than U+0020 and
the letters and marks that show nothing (Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the braille
blank U+2800, variation selectors, the combining grapheme joiner) are shown as `\\n`, `\\x1b`,
`\\u202e`; a backslash as `\\\\`, so an escape can never be mistaken for what a caller typed. A tool
name with a newline in it is one cell on one line, not a second, invented row.

The caller column tells an authenticated principal from what a client says about itself: a principal is
shown as is; without one the cell starts with `unverified`, then the connection the server assigned
(its first 16 characters unless `--wide`), then `client=NAME/VERSION` as the client sent it. In the
caller and tool cells a space too is escaped (`\\x20`), so padding cannot push the rest of the cell
out of sight.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Final

from mcpkit.sql.audit.record import AuditRecord

__all__ = ["COLUMNS", "escape_text", "render_table"]

COLUMNS: Final = ("at", "call_id", "caller", "tool", "outcome", "rows", "ms", "reason", "sql")
_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_UNSAFE: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
# letters and marks that render as nothing (Unicode's default-ignorable code points outside Cf)
_BLANK: Final = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)
_IDENTITY_WIDTH: Final = 19  # `session:` and 8 of its 16 hex digits, enough to tell sessions apart
_WIDTHS: Final = {"call_id": 12, "caller": 56, "tool": 40, "outcome": 14, "reason": 32}
_SQL_WIDTH: Final = 60


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    if ch == " " or (ch not in _BLANK and unicodedata.category(ch) not in _UNSAFE):
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_text(text: str, *, spaces: bool = False) -> str:
    """`text` with every character that could move the cursor, reorder or hide text made visible
    (`spaces`: U+0020 too, as `\\x20`).

    >>> escape_text("a\\nb\\x1b[2J\\u202egnp.exe\\\\")
    'a\\\\nb\\\\x1b[2J\\\\u202egnp.exe\\\\\\\\'
    >>> escape_text("alice\\u3164 x", spaces=True)
    'alice\\\\u3164\\\\x20x'
    """
    text = "".join(_escape(ch) for ch in text)
    return text.replace(" ", "\\x20") if spaces else text


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _cells(r: AuditRecord, wide: bool) -> list[str]:
    # the principal when authenticated; else a mark no principal can show (its spaces are escaped),
    # the connection the limits are keyed on, and last what the client calls itself
    if r.principal:
        caller = escape_text(r.principal, spaces=True)
    else:
        said = escape_text(f"{r.client_name}/{r.client_version or ''}", spaces=True)
        identity = escape_text(r.identity or "", spaces=True)
        parts = (
            "unverified",
            identity if wide else _clip(identity, _IDENTITY_WIDTH),
            f"client={said}" if r.client_name else "",
        )
        caller = " ".join(part for part in parts if part)
    sql = r.sql or r.statement or ""  # newlines escaped, not folded: `-- x\nDROP` must not read as a comment
    cells = {
        "at": r.at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-4] + "Z",
        "call_id": r.call_id,
        "caller": caller,
        "tool": escape_text(r.tool, spaces=True),
        "outcome": r.outcome,
        "rows": "" if r.rows is None else f"{r.rows}{'+' if r.truncated else ''}",
        "ms": "" if r.duration_ms is None else f"{r.duration_ms:.1f}",
        "reason": r.reason or "",
        "sql": sql,
    }
    out = []
    for name in COLUMNS:
        text = cells[name] if name in ("caller", "tool") else escape_text(str(cells[name]))
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
