"""The cached per-node metaschema check agrees with `jsonschema`'s own whole-schema check."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator, Draft7Validator, Draft202012Validator, FormatChecker

from mcpkit.lint._metaschema import dialect_of, metaschema_errors
from mcpkit.lint._refs import UNRESOLVED, recursive_refs, resolve
from mcpkit.lint._walk import walk

DIALECTS = {
    "2020-12": (Draft202012Validator, "https://json-schema.org/draft/2020-12/schema"),
    "draft-07": (Draft7Validator, "http://json-schema.org/draft-07/schema#"),
    "draft-04": (Draft4Validator, "http://json-schema.org/draft-04/schema#"),
}
NUMBERS = st.sampled_from([0, 1, 7, -1, 2.0, 1.5, -0.5, "3", True, None])
ANY_JSON = st.sampled_from([None, 0, "x", [], {}, [1, 1], {"a": [1]}])
LEAF_VALUES: dict[str, Any] = {
    "type": st.sampled_from(
        ["string", "integer", "object", "strnig", ["string", "null"], ["string", "string"], 5]
    ),
    "description": st.one_of(st.text(max_size=8), st.just(5)),
    "title": st.one_of(st.text(max_size=8), st.just([])),
    "minimum": NUMBERS,
    "maximum": NUMBERS,
    "minLength": NUMBERS,
    "maxItems": NUMBERS,
    "multipleOf": NUMBERS,
    "exclusiveMinimum": st.one_of(NUMBERS, st.booleans()),
    "pattern": st.sampled_from(["^a$", "[a-", 5]),
    "format": st.sampled_from(["date-time", "uri", "nope", 5]),
    "required": st.sampled_from([[], ["a"], ["a", "b"], ["a", "a"], [1], "a"]),
    "enum": st.sampled_from([[], ["a"], ["a", "b"], ["a", "a"], [1, {"x": 1}], "a"]),
    "const": ANY_JSON,
    "default": ANY_JSON,
    "examples": st.one_of(st.just([1, "a"]), st.just(5)),
    "uniqueItems": st.sampled_from([True, "yes"]),
    "x-vendor": ANY_JSON,
    "nullable": st.sampled_from([True, "no"]),
}


def schemas(dialect: str) -> st.SearchStrategy[Any]:
    """Random schema trees mixing valid and invalid keyword values for `dialect`."""
    leaf_keys = sorted(LEAF_VALUES)
    if dialect == "draft-04":
        leaf_keys = [k for k in leaf_keys if k not in ("const", "examples")]

    def node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        child_values: dict[str, st.SearchStrategy[Any]] = {
            "properties": st.one_of(
                st.dictionaries(st.sampled_from("abc"), children, max_size=2), st.just(5)
            ),
            "items": st.one_of(children, st.lists(children, max_size=2), st.just(5)),
            "anyOf": st.one_of(st.lists(children, max_size=2), st.just({})),
            "not": children,
            "additionalProperties": st.one_of(children, st.booleans()),
            "definitions": st.dictionaries(st.sampled_from("xy"), children, max_size=2),
        }
        if dialect == "2020-12":
            child_values["$defs"] = st.dictionaries(st.sampled_from("xy"), children, max_size=2)
            child_values["prefixItems"] = st.lists(children, max_size=2)
        else:
            child_values["dependencies"] = st.dictionaries(
                st.sampled_from("ab"), st.one_of(children, st.just(["b"]), st.just(5)), max_size=2
            )
        keys = st.sampled_from(leaf_keys + sorted(child_values))
        return st.dictionaries(keys, st.just(None), max_size=5).flatmap(
            lambda picked: st.fixed_dictionaries(
                {k: (LEAF_VALUES[k] if k in LEAF_VALUES else child_values[k]) for k in picked}
            )
        )

    base = st.one_of(st.booleans(), st.just({"type": "string"})) if dialect != "draft-04" else st.just({})
    return st.recursive(base, node, max_leaves=6)


def _per_node_valid(schema: Any, dialect: str) -> bool:
    root = {"$schema": DIALECTS[dialect][1], **schema} if isinstance(schema, dict) else schema
    d = dialect_of(root)
    if not isinstance(root, dict):
        return not metaschema_errors(d, root)
    return all(not metaschema_errors(d, node.schema) for node in walk(root, "inputSchema"))


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_agrees_with_jsonschema_check_schema(dialect: str) -> None:
    cls, uri = DIALECTS[dialect]
    # `pattern` is judged by SL023 with an ECMA-262 engine, not by the metaschema's Python `re` check.
    formats = [name for name in cls.FORMAT_CHECKER.checkers if name != "regex"]
    meta = cls(cls.META_SCHEMA, format_checker=FormatChecker(formats))

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(schemas(dialect))
    def check(schema: Any) -> None:
        root = {"$schema": uri, **schema} if isinstance(schema, dict) else schema
        assert _per_node_valid(schema, dialect) == meta.is_valid(root), root

    check()


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "string", "description": 5}, ("description",)),
        ({"minLength": -1}, ("minLength",)),
        ({"minLength": 1.5}, ("minLength",)),
        ({"multipleOf": 0}, ("multipleOf",)),
        ({"required": ["a", "a"]}, ("required",)),
        ({"properties": {"a": 5}}, ("properties", "a")),
        ({"anyOf": []}, ("anyOf",)),
    ],
)
def test_known_invalid_keywords_are_reported_at_their_path(
    schema: dict[str, Any], path: tuple[str, ...]
) -> None:
    errors = metaschema_errors(dialect_of({}), schema)
    assert [p for p, _ in errors] == [path]


def test_same_shape_hits_the_cache_but_messages_are_exact() -> None:
    d = dialect_of({})
    first = metaschema_errors(d, {"type": "string", "maxLength": "10", "description": "one"})
    second = metaschema_errors(d, {"type": "string", "maxLength": "99", "description": "two"})
    assert first == [(("maxLength",), "'10' is not of type 'integer'")]
    assert second == [(("maxLength",), "'99' is not of type 'integer'")]


def test_draft4_rejects_boolean_subschemas_that_2020_accepts() -> None:
    assert metaschema_errors(dialect_of({}), {"properties": {"a": True}}) == []
    draft4 = dialect_of({"$schema": "http://json-schema.org/draft-04/schema#"})
    assert [p for p, _ in metaschema_errors(draft4, {"properties": {"a": True}})] == [("properties", "a")]


def test_ref_resolution_and_recursion() -> None:
    root = {
        "$defs": {"a/b": {"type": "string"}, "Node": {"properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {"x": {"$anchor": "here", "type": "integer"}},
    }
    assert resolve(root, "#/$defs/a~1b") == {"type": "string"}
    assert resolve(root, "#/$defs/a%2Fb") is UNRESOLVED  # %2F decodes to "/", which splits the pointer
    assert resolve(root, "#here") == {"$anchor": "here", "type": "integer"}
    assert resolve(root, "#/$defs/missing") is UNRESOLVED
    assert resolve(root, "other.json#/x") is UNRESOLVED
    assert recursive_refs(root) == {"#/$defs/Node"}
    mutual = {
        "$defs": {"A": {"properties": {"b": {"$ref": "#/$defs/B"}}}, "B": {"items": {"$ref": "#/$defs/A"}}}
    }
    assert recursive_refs(mutual) == {"#/$defs/A", "#/$defs/B"}
    assert (
        recursive_refs({"$defs": {"A": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/A"}}})
        == set()
    )
