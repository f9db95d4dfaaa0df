"""`mcpkit lint FILE|-`: input shapes, output formats, exit codes, `--fix`."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mcpkit.cli import main
from mcpkit.lint import REGISTRY
from tests.helpers import run_mcpkit
from tests.lint.lint_support import FIXTURES, tool

CLEAN = {
    "tools": [tool("search", {"type": "object", "properties": {"q": {"type": "string", "description": "q"}}})]
}
BROKEN = {
    "tools": [
        tool("search", {"properties": {"tags": {"type": "array", "description": "t"}}}),
        tool(
            "big",
            {"type": "object", "properties": {"q": {"type": "string", "description": "x" * 400}, "n": {}}},
        ),
    ]
}


def _write(tmp_path: Path, data: Any, name: str = "tools.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, _write(tmp_path, CLEAN))
    assert code == 0
    size = len(json.dumps(CLEAN, separators=(",", ":")))
    assert out.splitlines()[0] == f"1 tools, {size} bytes; 0 errors, 0 warnings, 0 info"


def test_errors_exit_1_with_one_line_per_finding_and_a_size_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, _write(tmp_path, BROKEN))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("search/inputSchema: SL001 [error] ")
    assert lines[0].endswith("(breaks: claude-code, cursor, vscode, windsurf, spec)")
    assert lines[1].startswith("search/inputSchema/properties/tags: SL004 [error] array without `items`")
    summary = lines.index("")
    assert lines[summary + 1].startswith("2 tools, ")
    assert lines[summary + 2] == "tool sizes:"
    table = [line.split() for line in lines[summary + 3 :]]
    assert [row[0] for row in table] == ["big", "search"]  # largest first
    assert int(table[0][1].replace(",", "")) > int(table[1][1].replace(",", ""))


def test_size_table_is_cut_at_sizes_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = {"tools": [tool(f"t{i}", description="d" * i) for i in range(30)]}
    path = _write(tmp_path, data)
    _, out, _ = _run(capsys, path)
    rows = out.split("largest tools:\n", 1)[1].splitlines()
    assert [r.split()[0] for r in rows[:3]] == ["t29", "t28", "t27"]
    assert len(rows) == 21 and rows[-1] == "  ... 10 more"
    _, out, _ = _run(capsys, path, "--sizes", "0")
    assert len(out.split("tool sizes:\n", 1)[1].splitlines()) == 30


def test_warnings_alone_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}  # no description: a warning
    code, out, _ = _run(capsys, _write(tmp_path, data))
    assert code == 0 and "SL013 [warning]" in out


def test_json_format_is_exactly_the_documented_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, _write(tmp_path, BROKEN), "--format", "json")
    body = json.loads(out)
    assert code == 1
    assert list(body) == ["tools", "payload_bytes", "findings"]
    assert body["tools"] == 2 and body["payload_bytes"] == len(json.dumps(BROKEN, separators=(",", ":")))
    assert body["findings"]
    for finding in body["findings"]:
        assert list(finding) == ["rule", "severity", "tool", "path", "message", "clients"]
    assert body["findings"][0] == {
        "rule": "SL001",
        "severity": "error",
        "tool": "search",
        "path": "/inputSchema",
        "message": 'inputSchema has no root `"type": "object"`',
        "clients": ["claude-code", "cursor", "vscode", "windsurf", "spec"],
    }


# The parts of SARIF 2.1.0 that code-scanning upload relies on.
SARIF_SHAPE = {
    "type": "object",
    "required": ["version", "$schema", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "pattern": "sarif-2\\.1\\.0"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription"],
                                            "properties": {
                                                "shortDescription": {
                                                    "type": "object",
                                                    "required": ["text"],
                                                },
                                                "defaultConfiguration": {
                                                    "properties": {
                                                        "level": {
                                                            "enum": ["none", "note", "warning", "error"]
                                                        }
                                                    }
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "message", "locations", "level"],
                            "properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"]},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                    }
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_sarif_has_the_structure_code_scanning_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, BROKEN)
    code, out, _ = _run(capsys, path, "--format", "sarif")
    log = json.loads(out)
    assert code == 1
    jsonschema.validate(log, SARIF_SHAPE)
    run = log["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert ids == sorted(REGISTRY)
    assert run["results"]
    for result in run["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == Path(path).as_posix()
    assert {r["level"] for r in run["results"]} <= {"error", "warning", "note"}
    assert "note" in {r["level"] for r in run["results"]}  # SL013's info maps to SARIF's note


@pytest.mark.parametrize(
    "shape",
    [
        CLEAN,
        CLEAN["tools"],
        {"jsonrpc": "2.0", "id": 7, "result": CLEAN},
        [{"jsonrpc": "2.0", "id": 1, "result": CLEAN}, {"jsonrpc": "2.0", "id": 2, "result": CLEAN}],
    ],
    ids=["object", "bare-list", "jsonrpc-response", "jsonrpc-pages"],
)
def test_accepted_input_shapes(shape: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, _write(tmp_path, shape), "--format", "json")
    pages = 2 if isinstance(shape, list) and shape and "jsonrpc" in shape[0] else 1
    assert code == (1 if pages == 2 else 0)  # two pages repeat "search": a duplicate name
    assert json.loads(out)["tools"] == pages


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(BROKEN)))
    code, out, _ = _run(capsys, "-", "--format", "json")
    assert code == 1 and json.loads(out)["tools"] == 2


def test_instructions_in_the_file_are_linted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, _write(tmp_path, {**CLEAN, "instructions": "y" * 2100}), "--format", "json")
    assert code == 0
    assert [f["path"] for f in json.loads(out)["findings"]] == ["/instructions"]


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        (None, [], "cannot read"),
        ("{not json", [], "not JSON"),
        ('{"tool": []}', [], 'no "tools" key'),
        ('{"tools": [1]}', [], "tools[0] is int"),
        ('{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}}', [], "JSON-RPC error"),
        (json.dumps(CLEAN), ["--profile", "netscape"], "unknown profile(s) netscape"),
        (json.dumps(CLEAN), ["--header", "A: b"], "--header only applies to --url"),
    ],
    ids=["missing-file", "bad-json", "no-tools", "not-objects", "rpc-error", "bad-profile", "header-no-url"],
)
def test_usage_and_input_errors_exit_2(
    content: str | None, argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, out, err = _run(capsys, str(path), *argv)
    assert code == 2 and out == ""
    assert message in err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["lint"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["lint", "x.json", "--format", "yaml"])
    assert exc.value.code == 2


def test_profile_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, BROKEN)
    _, out, _ = _run(capsys, path, "--format", "json", "--profile", "cursor")
    assert {c for f in json.loads(out)["findings"] for c in f["clients"]} == {"cursor"}
    _, out, _ = _run(capsys, path, "--format", "json", "--profile", "all")
    clients = {c for f in json.loads(out)["findings"] for c in f["clients"]}
    assert {"gemini", "openai-strict", "claude-api"} <= clients


def test_protocol_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = {"tools": [tool("t", outputSchema={"type": "array", "items": {"type": "string"}})]}
    path = _write(tmp_path, data)
    assert _run(capsys, path)[0] == 1
    assert _run(capsys, path, "--protocol", "2026-07-28")[0] == 0


def test_fix_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "SL004" / "bad.json"
    out_path = tmp_path / "fixed.json"
    code, out, err = _run(capsys, str(source), "--fix", str(out_path), "--format", "json")
    assert "fixed: tags /inputSchema/properties/tags: added items {}" in err
    left = json.loads(out)["findings"]
    # The type array ["array", "null"] stays for Cursor: no meaning-preserving fix exists for it.
    assert code == 1 and {f["rule"] for f in left if f["severity"] == "error"} == {"SL017"}
    assert not [f for f in left if f["rule"] == "SL004"]
    code, out, _ = _run(capsys, str(out_path), "--format", "json")
    assert json.loads(out)["findings"] == left  # the written file lints as reported


def test_fix_reports_what_it_could_not_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_path = tmp_path / "fixed.json"
    code, out, _ = _run(
        capsys, str(FIXTURES / "SL009" / "bad.json"), "--fix", str(out_path), "--format", "json"
    )
    left = [(f["tool"], f["rule"]) for f in json.loads(out)["findings"] if f["severity"] == "error"]
    assert code == 1
    # The dangling ref stays an error; the recursive tree (which no fix can inline) is Gemini's error.
    assert ("dangling", "SL009") in left and ("defs", "SL009") not in left
    assert "$defs" not in json.loads(out_path.read_text())["tools"][0]["inputSchema"]


def test_fix_to_an_unwritable_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, _write(tmp_path, CLEAN), "--fix", str(tmp_path / "no" / "such" / "dir.json"))
    assert code == 2 and "cannot write" in err


def test_end_to_end_through_python_m_mcpkit(tmp_path: Path) -> None:
    proc = run_mcpkit("lint", _write(tmp_path, BROKEN), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["tools"] == 2


def test_a_single_page_response_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = {"jsonrpc": "2.0", "id": 1, "result": {**CLEAN, "nextCursor": "2"}}
    code, _, err = _run(capsys, _write(tmp_path, page))
    assert code == 0 and "only one page" in err
