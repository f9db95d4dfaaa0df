"""The engine: profiles, protocols, UTF-16 lengths, ordering, speed, parallel runs, import hygiene."""

from __future__ import annotations

import ast
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

import mcpkit.lint
from mcpkit.lint import DEFAULT_PROFILES, PROFILES, PROTOCOLS, Finding, lint_report, lint_tools
from mcpkit.lint._engine import PARALLEL_MIN_TOOLS, _workers
from mcpkit.lint.rules.sl005_long_description import utf16_length
from tests.lint.lint_support import ALL_PROFILES, tool

LINT_SRC = Path(mcpkit.lint.__file__).parent


def _rules(found: list[Finding]) -> list[str]:
    return [f.rule for f in found]


def test_public_surface() -> None:
    assert set(mcpkit.lint.__all__) >= {"lint_tools", "Finding", "REGISTRY", "PROFILES", "fix_tools"}
    for name in mcpkit.lint.__all__:
        assert getattr(mcpkit.lint, name) is not None
    fields = {f.name for f in dataclasses.fields(Finding)}
    assert {"rule", "severity", "tool", "path", "message", "clients"} <= fields


def test_finding_is_frozen() -> None:
    found = lint_tools([tool("t", {})])[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.rule = "SL999"  # type: ignore[misc]


def test_default_profiles_are_the_general_purpose_clients() -> None:
    assert set(DEFAULT_PROFILES) == {"claude-code", "cursor", "vscode", "windsurf", "spec"}
    assert set(PROFILES) - set(DEFAULT_PROFILES) == {"claude-api", "openai-strict", "gemini"}


def test_clean_tools_have_no_findings() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "What to look for"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    everyone_but_gemini = [p for p in ALL_PROFILES if p != "gemini"]
    assert lint_tools([tool("search", schema)], profiles=everyone_but_gemini) == []
    # OpenAI strict demands additionalProperties: false, which Gemini's legacy schema does not know.
    del schema["additionalProperties"]
    assert (
        lint_tools([tool("search", schema)], profiles=[p for p in ALL_PROFILES if p != "openai-strict"]) == []
    )


def test_findings_name_only_selected_clients() -> None:
    bad = [tool("t", {"type": "object", "properties": {"a": {"type": "array", "description": "a"}}})]
    assert lint_tools(bad) != []  # vscode is a default profile
    only_cursor = lint_tools(bad, profiles=["cursor"])
    assert all(set(f.clients) <= {"cursor"} for f in only_cursor)
    assert "SL004" not in _rules(only_cursor)
    vs = [f for f in lint_tools(bad, profiles=["vscode", "gemini"]) if f.rule == "SL004"]
    assert vs[0].clients == ("vscode", "gemini") and vs[0].severity == "error"


def test_severity_is_the_worst_of_the_selected_clients() -> None:
    text = "x" * 1100  # over OpenAI's 1024 (error), under Claude Code's 2048
    assert _rules(lint_tools([tool("t", description=text)], profiles=["claude-code"])) == []
    strict = {"type": "object", "properties": {}, "additionalProperties": False}
    both = lint_tools([tool("t", strict, description="x" * 2100)], profiles=["claude-code", "openai-strict"])
    assert [(f.rule, f.severity) for f in both] == [("SL005", "error")]
    cc = lint_tools([tool("t", description="x" * 2100)], profiles=["claude-code"])
    assert [(f.rule, f.severity) for f in cc] == [("SL005", "warning")]


@pytest.mark.parametrize(
    ("text", "units"),
    [("abc", 3), ("é", 1), ("\U0001f600", 2), ("a\U0001f600b", 4), ("\u4e2d\U00020000", 3)],
)
def test_utf16_length_counts_like_javascript(text: str, units: int) -> None:
    assert utf16_length(text) == units


@pytest.mark.parametrize(
    ("description", "fires"),
    [
        ("\U0001f600" * 1024, False),  # 2048 units, 1024 code points
        ("\U0001f600" * 1024 + "a", True),  # 2049 units: Python's len() says 1025
        ("a" * 2048, False),
        ("a" * 2049, True),
    ],
)
def test_claude_code_description_limit_is_in_utf16_units(description: str, fires: bool) -> None:
    found = lint_tools([tool("t", description=description)], profiles=["claude-code"])
    assert ("SL005" in _rules(found)) is fires


def test_instructions_are_linted() -> None:
    assert _rules(lint_tools([tool("t")], instructions="x" * 2049)) == ["SL005"]
    assert lint_tools([tool("t")], instructions="x" * 2048) == []


def test_protocol_2026_relaxes_the_output_root() -> None:
    tools = [tool("t", outputSchema={"type": "array", "items": {"type": "string"}})]
    assert "SL015" in _rules(lint_tools(tools))
    assert "SL015" not in _rules(lint_tools(tools, protocol="2026-07-28"))
    assert PROTOCOLS == ("2025-11-25", "2026-07-28")


def test_unknown_profile_and_protocol_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        lint_tools([], profiles=["netscape"])
    with pytest.raises(ValueError, match="unknown protocol"):
        lint_tools([], protocol="2024-01-01")
    with pytest.raises(TypeError, match=r"tools\[0\]"):
        lint_tools(["not a tool"])  # type: ignore[list-item]


def test_claude_code_prefix_budget_uses_the_config_key() -> None:
    tools = [tool("n" * 50)]
    assert lint_tools(tools, profiles=["claude-code"], server_key="gh") == []  # 5 + 2 + 2 + 50 fits
    assumed = lint_tools(tools, profiles=["claude-code"])  # an assumed 10-character key only warns
    assert [(f.rule, f.severity) for f in assumed] == [("SL008", "warning")]
    assert "assuming a 10-character config key" in assumed[0].message
    found = lint_tools(tools, profiles=["claude-code"], server_key="a-rather-long-server")
    assert [(f.rule, f.severity) for f in found] == [("SL008", "error")]
    assert "mcp__a-rather-long-server__" in found[0].message


def test_profiles_given_as_one_string_are_not_read_letter_by_letter() -> None:
    tools = [tool("t", {"type": "object", "properties": {"a": {"type": ["string", "null"]}}})]
    assert lint_tools(tools, profiles="all") == lint_tools(tools, profiles=ALL_PROFILES)
    assert {c for f in lint_tools(tools, profiles="cursor") for c in f.clients} == {"cursor"}
    with pytest.raises(ValueError, match="unknown profile"):
        lint_tools(tools, profiles="cursor,netscape")


def test_order_is_server_first_then_tools_in_list_order() -> None:
    tools = [tool("b", {}), tool("a", {}), tool("b", {})]
    found = lint_tools(tools, instructions="x" * 3000)
    assert found[0].tool is None
    assert [f.tool for f in found if f.rule == "SL001"] == ["b", "a", "b"]
    assert [(f.rule, f.tool) for f in found] == [
        ("SL005", None),
        ("SL001", "b"),
        ("SL001", "a"),
        ("SL001", "b"),
        ("SL007", "b"),  # the duplicate is the third tool, not the first
    ]


def test_report_sizes_are_utf8_bytes_of_compact_json() -> None:
    tools = [tool("t", description="é")]
    report = lint_report(tools)
    compact = len('{"name":"t","description":"é","inputSchema":{"type":"object","properties":{}}}'.encode())
    assert report.tool_sizes == [("t", compact)]
    assert report.payload_bytes == compact + len('{"tools":[]}')


def _ten_tools() -> list[dict[str, Any]]:
    return [
        tool(
            f"tool_{i}",
            {
                "type": "object",
                "properties": {
                    "q": {"type": "string", "description": f"query {i}"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "max rows"},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "tags"},
                    "since": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
                },
                "required": ["q"],
            },
            outputSchema={"type": "object", "properties": {"rows": {"type": "array", "items": {}}}},
        )
        for i in range(10)
    ]


def test_ten_tools_lint_in_a_few_milliseconds() -> None:
    tools = _ten_tools()
    lint_tools(tools)  # warm the metaschema cache, as a long-running process would be
    timings = []
    for _ in range(20):
        started = time.perf_counter()
        lint_tools(tools)
        timings.append(time.perf_counter() - started)
    timings.sort()
    # The median on an idle 2-core machine is ~2 ms; the bound leaves room for a loaded CI box.
    assert timings[len(timings) // 2] < 0.025, timings


@pytest.mark.skipif(_workers(0, 10 * PARALLEL_MIN_TOOLS) < 2, reason="needs fork and two CPUs")
def test_parallel_run_matches_a_single_process_run() -> None:
    tools = []
    for i in range(PARALLEL_MIN_TOOLS + 500):
        props: dict[str, Any] = {"q": {"type": "string", "description": "q"}}
        if i % 97 == 0:
            props["bad"] = {"type": "array"}
        if i % 89 == 0:
            props["worse"] = {"type": "strnig", "description": "w"}
        tools.append(tool(f"t{i}", {"type": "object", "properties": props}))
    single = lint_report(tools, profiles=ALL_PROFILES, jobs=1)
    double = lint_report(tools, profiles=ALL_PROFILES, jobs=2)
    assert double == single
    assert {"SL004", "SL010", "SL014"} <= {f.rule for f in single.findings}


def _module_imports(path: Path) -> tuple[set[str], set[str]]:
    """Modules imported at module level, and inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top: set[str] = set()
    inner: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            target = top if node in tree.body else inner
            target.update(names)
    return top, inner


@pytest.mark.parametrize("path", sorted(LINT_SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(LINT_SRC)))
def test_lint_imports_nothing_of_the_core_and_the_sdk_only_lazily(path: Path) -> None:
    top, inner = _module_imports(path)
    for name in top | inner:
        if name.startswith("mcpkit"):
            assert name.startswith("mcpkit.lint"), f"{path.name} imports {name}"
    for name in top:
        root = name.split(".")[0]
        assert root not in {"mcp", "mcp_types", "httpx2", "anyio", "fastmcp"}, (
            f"{path.name} imports {name} eagerly"
        )


def test_a_single_schema_over_claude_ais_cap() -> None:
    huge = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "d" * 1000} for i in range(1100)},
    }
    found = [f for f in lint_tools([tool("huge", huge)], profiles=["claude-api"]) if f.rule == "SL006"]
    assert [(f.tool, f.path, f.severity) for f in found] == [("huge", "/inputSchema", "error")]
    assert lint_tools([tool("small")], profiles=["claude-api"]) == []


def test_payload_budget_names_the_tools_to_trim() -> None:
    tools = [tool(f"t{i}", description="x" * (3000 + i)) for i in range(20)]  # about 61 KB
    found = [f for f in lint_tools(tools, profiles=["claude-code"]) if f.rule == "SL006"]
    assert len(found) == 1 and found[0].tool is None and found[0].severity == "warning"
    assert "the 20 tools may not load" in found[0].message and "single reports" in found[0].message
    assert "(t19, t18, t17, t16" in found[0].message  # the largest first
