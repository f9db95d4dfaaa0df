"""A Hypothesis strategy following a tool's JSON Schema (the subset mcpkit emits): mostly valid, some junk.

hypothesis-jsonschema does not run with current Hypothesis, and the schemas mcpkit compiles use a
small, known subset, so this walks that subset directly.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.fuzz.strategies import json_values


def from_schema(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for `schema`: valid ones, with junk mixed in at every level."""
    valid = _valid(schema, depth)
    return st.one_of(valid, valid, valid, json_values) if depth < 4 else valid


def _valid(schema: Any, depth: int) -> st.SearchStrategy[Any]:
    if not isinstance(schema, dict):
        return json_values
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, depth + 1) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_valid({**schema, "type": k}, depth) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**40)), schema.get("maximum", 2**40))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 60), 200))
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*[from_schema(s, depth + 1) for s in schema["prefixItems"]]).map(list)
        return st.lists(
            from_schema(schema.get("items", {}), depth + 1),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 4), 4),
        )
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {name: from_schema(sub, depth + 1) for name, sub in props.items() if name in required}
        optional = {name: from_schema(sub, depth + 1) for name, sub in props.items() if name not in required}
        return st.fixed_dictionaries(fixed, optional=optional)
    return json_values
