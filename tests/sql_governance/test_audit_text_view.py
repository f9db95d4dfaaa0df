"""Nothing a caller sends can forge or garble `mcpkit audit`'s text view or its JSON-lines export.

Every control character (C0, DEL, C1), every bidi override and isolate, the zero-width characters, the
line and paragraph separators and a lone surrogate go through every text field of a record; the view must
stay one line per call with none of them left raw. Then through the real server: an unknown tool whose
name carries a newline and a whole fake row, and a client whose name carries terminal escapes.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from mcpkit.sql.audit import AuditRecord
from mcpkit.sql.audit.view import escape_text, render_table
from tests.helpers import ROOT, run_mcpkit

C0 = [chr(c) for c in range(0x00, 0x20)] + ["\x7f"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
SEPARATORS = ["\u2028", "\u2029"]
HOSTILE = [*C0, *C1, *BIDI, *INVISIBLE, *SEPARATORS, "\ud800"]

TEXT_FIELDS = ("call_id", "tool", "outcome", "principal", "identity", "client_name", "client_version")
SHOWN_LATER = ("reason", "sql", "statement")


def _raw_unsafe(text: str) -> list[str]:
    """Characters in `text` (one table line) that a terminal or an editor would act on."""
    return [
        ch
        for ch in text
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") or ch in "\x85\u2028\u2029"
    ]


def test_escape_text_makes_every_hostile_character_visible() -> None:
    for ch in HOSTILE:
        shown = escape_text(f"a{ch}b")
        assert shown.startswith("a\\") and shown.endswith("b") and not _raw_unsafe(shown), repr(ch)
    assert escape_text("a\\nb") == "a\\\\nb"  # a typed backslash-n is not an escaped newline
    assert escape_text("SELECT 'é' -- ünïcode") == "SELECT 'é' -- ünïcode"


@pytest.mark.parametrize("ch", HOSTILE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_field_of_the_text_view_escapes(ch: str) -> None:
    fake_row = f"{ch}2026-01-01T00:00:00.00Z  c0ffee  root  execute_query  OK  1  0.1  x  SELECT 1"
    fields = {name: f"{name}{fake_row}" for name in TEXT_FIELDS}
    records = [
        AuditRecord(**fields, reason=f"r{fake_row}", sql=f"SELECT 1{fake_row}"),
        AuditRecord(**fields, reason=f"r{fake_row}", statement=f"SELECT 2{fake_row}"),  # a refusal
        AuditRecord(**{**fields, "principal": None}),  # the caller shown as identity
        AuditRecord(**{**fields, "principal": None, "identity": None}),  # as client name/version
    ]
    for wide in (False, True):
        table = render_table(records, wide=wide)
        lines = table.split("\n")
        assert len(lines) == 1 + len(records), repr(ch)
        assert table.splitlines() == lines  # no other character a reader splits lines on
        for line in lines:
            assert not _raw_unsafe(line), (repr(ch), line)
    wide = render_table(records, wide=True).split("\n")
    visible = escape_text(ch)
    for name in TEXT_FIELDS:
        spaces = name not in ("call_id", "outcome")  # the caller and tool cells escape spaces too
        assert visible in wide[1] and escape_text(fields[name], spaces=spaces) in "\n".join(wide), name
    assert "SELECT 1" + visible in wide[1] and "SELECT 2" + visible in wide[2]


def test_the_json_export_is_one_ascii_line_per_call(tmp_path: Path) -> None:
    from mcpkit.sql.audit import open_store
    from tests.sql_governance.test_audit import call_entries

    path = tmp_path / "audit.db"
    store = open_store(path=path)
    hostile = "".join(HOSTILE).replace("\ud800", "")  # a lone surrogate cannot come from JSON-RPC text
    for i in range(3):
        store.append(call_entries(i, tool=f"t{hostile}", sql=f"SELECT {hostile}", reason=hostile))
    store.close()
    done = run_mcpkit("audit", "--audit", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii()
    lines = done.stdout.splitlines()  # splits on \x85, \u2028, \x1c... too: none are raw
    assert len(lines) == 3 and all(json.loads(x)["tool"] == f"t{hostile}" for x in lines)


@pytest.mark.anyio
async def test_a_caller_cannot_forge_a_row_through_the_real_server(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    args = ["-m", "mcpkit", "sql", "serve", "--demo", "--audit", str(audit)]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    fake = "2026-01-01T00:00:00.00Z  0123456789ab  root  execute_query  OK  1  0.1      SELECT 1"
    client_name = "evil\x1b[2K\r\x1b]0;pwned\x07\u202eredoc"
    async with Client(
        params, mode="legacy", client_info=Implementation(name=client_name, version="1\n2")
    ) as client:
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool(f"nope\n{fake}", {})
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool(f"nope\r{fake}\u2028{fake}", {})
        await client.call_tool("execute_query", {"query": f"SELECT 1 -- \x1b[31m\n{fake}"})
    done = run_mcpkit("audit", "--audit", str(audit))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.rstrip("\n").split("\n")
    assert len(lines) == 4, done.stdout  # header + three calls, no invented row
    for line in lines:
        assert not _raw_unsafe(line), line
    wide = run_mcpkit("audit", "--audit", str(audit), "--wide").stdout.rstrip("\n").split("\n")
    assert len(wide) == 4 and "nope\\n2026-01-01" in wide[1] and "nope\\r2026" in wide[2]
    assert "-- \\x1b[31m\\n2026-01-01" in wide[3]
    assert "\\x1b[2K\\r\\x1b]0;pwned\\x07\\u202eredoc/1\\n2" in wide[3]  # the client, escaped


FILLERS = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u2800", "\u200b", "\u00a0", "\u3000", "\u034f", "\ufe0f"]


@pytest.mark.parametrize("pad", [" ", *FILLERS], ids=lambda c: f"U+{ord(c):04X}")
def test_padding_cannot_pass_a_client_off_as_a_principal(pad: str) -> None:
    spoof = AuditRecord(
        call_id="c1", tool="execute_query" + pad * 3, outcome="OK", client_name="alice" + pad * 60,
        client_version="1", identity="session:7d9655788c60666a",
    )  # fmt: skip
    real = AuditRecord(call_id="c2", tool="execute_query", outcome="OK", principal="alice")
    spoofed, authenticated = (line.split()[2] for line in render_table([spoof, real]).splitlines()[1:])
    assert authenticated == "alice"
    assert spoofed.startswith("unverified") and "alice" not in spoofed[: len("unverified")]
    line = render_table([spoof]).splitlines()[1]
    assert "unverified session:7d965578... client=alice" in line  # the connection is never pushed out
    assert "session:7d9655788c60666a" in render_table([spoof], wide=True)
    assert (pad == " " or pad not in line) and "execute_query" + escape_text(pad, spaces=True) in line
    wide = render_table([spoof], wide=True).splitlines()[1]
    assert "client=alice" + escape_text(pad, spaces=True) * 60 + "/1" in wide
