"""`fix_tools` / `--fix`: only meaning-preserving repairs, and what is left is reported."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsonschema import validators

from mcpkit.lint import fix_tools, lint_tools
from mcpkit.lint._fix import apply_fixes
from mcpkit.lint._load import parse_tool_list
from tests.lint.lint_support import ALL_PROFILES, FIXTURES, tool

#: Per fixable rule: the (tool, path) findings its bad fixture keeps after fixing (cannot be fixed).
UNFIXABLE = {
    "SL001": {("string_schema", "/inputSchema"), ("string_root", "/inputSchema/type")},
    "SL002": {
        ("typo_uri", "/inputSchema/$schema"),
        ("draft2019", "/inputSchema/$schema"),
    },
    "SL004": set(),
    "SL009": {
        ("dangling", "/inputSchema/properties/user/$ref"),
        ("remote", "/inputSchema/properties/user/$ref"),
        ("tree", "/inputSchema/properties/node/$ref"),
        ("tree", "/inputSchema/$defs/Node/properties/children/items/$ref"),
    },
    "SL011": set(),  # the prefixItems warnings for Cursor stay, but no error does
    "SL015": {
        ("array_out", "/outputSchema/type"),
        ("string_out", "/outputSchema"),
    },
}


@pytest.mark.parametrize("code", sorted(UNFIXABLE))
def test_fixing_the_bad_fixture_leaves_only_what_cannot_be_fixed(code: str) -> None:
    listing = parse_tool_list((FIXTURES / code / "bad.json").read_text(encoding="utf-8"))
    before = {(f.tool, f.path) for f in lint_tools(listing.tools, profiles=ALL_PROFILES) if f.rule == code}
    _, left = fix_tools(listing.tools, profiles=ALL_PROFILES)
    after = {(f.tool, f.path) for f in left if f.rule == code and f.severity == "error"}
    assert after == UNFIXABLE[code]
    assert before - after, f"--fix repaired nothing for {code}"


def test_tuple_fix_leaves_only_cursors_prefix_items_warning() -> None:
    listing = parse_tool_list((FIXTURES / "SL011" / "bad.json").read_text(encoding="utf-8"))
    _, left = fix_tools(listing.tools, profiles=ALL_PROFILES)
    for f in left:
        if f.rule == "SL011" and f.tool == "tuple_2020":
            assert f.severity == "warning" and f.clients == ("cursor",)


def test_fix_does_not_touch_its_input() -> None:
    tools = [tool("t", {"properties": {"a": {"type": "array"}}})]
    before = copy.deepcopy(tools)
    fixed, _ = fix_tools(tools)
    assert tools == before
    assert fixed[0]["inputSchema"] == {"type": "object", "properties": {"a": {"type": "array", "items": {}}}}


def _same_verdicts(original: dict[str, Any], fixed: dict[str, Any], instances: list[Any]) -> None:
    old = validators.validator_for(original)(original)
    new = validators.validator_for(fixed)(fixed)
    for instance in instances:
        assert old.is_valid(instance) == new.is_valid(instance), instance


DRAFT7 = "http://json-schema.org/draft-07/schema#"


def test_dropping_draft7_keeps_tuples_dependencies_and_refs_meaning_the_same() -> None:
    schema = {
        "$schema": DRAFT7,
        "type": "object",
        "properties": {
            "point": {
                "type": "array",
                "items": [{"type": "number"}, {"type": "string"}],
                "additionalItems": False,
            },
            "card": {"type": "string"},
            "billing": {"type": "string"},
            "user": {"$ref": "#/definitions/User", "description": "who"},
        },
        "dependencies": {"card": ["billing"], "billing": {"required": ["user"]}},
        "definitions": {
            "User": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
        },
    }
    fixed, changes = apply_fixes([tool("t", schema)])
    out = fixed[0]["inputSchema"]
    assert "$schema" not in out and "definitions" not in out
    assert out["properties"]["point"] == {
        "type": "array",
        "prefixItems": [{"type": "number"}, {"type": "string"}],
        "items": False,
    }
    assert out["dependentRequired"] == {"card": ["billing"]}
    assert out["properties"]["user"]["description"] == "who"
    assert len(changes) >= 3
    _same_verdicts(
        schema,
        out,
        [
            {},
            {"point": [1, "a"]},
            {"point": [1, "a", 3]},
            {"point": ["a", 1]},
            {"point": [1]},
            {"card": "4111"},
            {"card": "4111", "billing": "x"},
            {"card": "4111", "billing": "x", "user": {"id": 1}},
            {"billing": "x", "user": {"id": "1"}},
            {"user": {}},
        ],
    )
    left = lint_tools(fixed, profiles=["claude-code", "claude-api", "spec"])
    assert [f for f in left if f.rule not in ("SL013", "SL025")] == []  # descriptions: info only


def test_draft7_ref_with_validating_siblings_is_left_alone() -> None:
    schema = {
        "$schema": DRAFT7,
        "type": "object",
        "properties": {"n": {"$ref": "#/definitions/N", "maximum": 3}},  # draft-07 ignores "maximum" here
        "definitions": {"N": {"type": "integer"}},
    }
    fixed, _ = apply_fixes([tool("t", schema)])
    assert fixed[0]["inputSchema"]["$schema"] == DRAFT7
    assert fixed[0]["inputSchema"]["properties"]["n"]["$ref"] == "#/definitions/N"


@pytest.mark.parametrize(
    ("target", "siblings", "merged"),
    [
        ({"type": "integer"}, {"description": "count"}, True),
        ({"type": "integer"}, {"maximum": 3}, True),
        ({"type": "integer", "maximum": 9}, {"maximum": 3}, False),  # both constrain the same keyword
        ({"properties": {"a": {}}, "additionalProperties": False}, {"properties": {"b": {}}}, False),
        ({"additionalProperties": False}, {"properties": {"b": {}}}, False),  # would admit "b"
        ({"type": "object", "$id": "urn:x"}, {}, False),  # a resource of its own
    ],
)
def test_ref_siblings_merge_only_when_meaning_cannot_change(
    target: dict[str, Any], siblings: dict[str, Any], merged: bool
) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/T", **siblings}},
        "$defs": {"T": target},
    }
    fixed, _ = apply_fixes([tool("t", schema)])
    out = fixed[0]["inputSchema"]
    assert ("$ref" not in out["properties"]["x"]) is merged
    if merged:
        instances: list[Any] = [
            {},
            {"x": 1},
            {"x": 5},
            {"x": "a"},
            {"x": {"a": 1}},
            {"x": {"b": 1}},
            {"x": {}},
        ]
        _same_verdicts(schema, out, instances)


def test_items_arrays_become_prefix_items_in_2020() -> None:
    schema = {"type": "object", "properties": {"p": {"type": "array", "items": [{"type": "number"}]}}}
    fixed, _ = apply_fixes([tool("t", schema)])
    # SL004 then adds "items": {}, which in 2020-12 is what a missing "items" meant anyway.
    assert fixed[0]["inputSchema"]["properties"]["p"] == {
        "type": "array",
        "prefixItems": [{"type": "number"}],
        "items": {},
    }


def test_output_root_fix_only_under_2025() -> None:
    tools = [tool("t", outputSchema={"properties": {"r": {"type": "string"}}})]
    fixed, _ = apply_fixes(tools)
    assert fixed[0]["outputSchema"]["type"] == "object"
    untouched, _ = apply_fixes(tools, protocol="2026-07-28")
    assert "type" not in untouched[0]["outputSchema"]


def test_fix_output_is_json_round_trippable() -> None:
    listing = parse_tool_list((FIXTURES / "SL009" / "bad.json").read_text(encoding="utf-8"))
    fixed, _ = fix_tools(listing.tools)
    assert json.loads(json.dumps(fixed)) == fixed
