"""Schema compilation: self-contained 2020-12 objects that validate what the model validates."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from mcpkit import DefinitionError
from mcpkit.schema import compile_model, iter_subschemas


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="Street and number")
    city: str


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    quantity: int = Field(description="How many", ge=1)
    ship_to: Address = Field(description="Where to ship")
    bill_to: Address | None = None
    point: tuple[float, float] = Field(description="Longitude and latitude")
    mode: Literal["air", "sea"] = "sea"
    tree: Node | None = None


def walk(schema: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(node)
            stack.extend(iter_subschemas(node))
    return out


def test_object_root_without_refs_titles_or_dialect() -> None:
    compiled = compile_model(Address, mode="validation", what="t")
    text = json.dumps(compiled.schema)
    assert compiled.schema["type"] == "object"
    assert "$ref" not in text and "$defs" not in text and "$schema" not in text
    assert all("title" not in node for node in walk(compiled.schema))
    assert compiled.recursive == ()


def test_nested_models_are_inlined_and_field_descriptions_win() -> None:
    schema = compile_model(Order, mode="validation", what="t").schema
    ship = schema["properties"]["ship_to"]
    assert ship["type"] == "object"
    assert ship["description"] == "Where to ship"  # the field's, not the model docstring
    assert ship["properties"]["street"]["description"] == "Street and number"
    assert schema["properties"]["quantity"] == {"description": "How many", "minimum": 1, "type": "integer"}
    assert schema["additionalProperties"] is False


def test_tuples_use_prefix_items() -> None:
    point = compile_model(Order, mode="validation", what="t").schema["properties"]["point"]
    assert point["prefixItems"] == [{"type": "number"}, {"type": "number"}]
    assert not isinstance(point.get("items"), list)


def test_only_recursive_definitions_keep_a_local_ref() -> None:
    compiled = compile_model(Order, mode="validation", what="t")
    assert compiled.recursive == ("Node",)
    assert set(compiled.schema["$defs"]) == {"Node"}
    refs = {n["$ref"] for n in walk(compiled.schema) if "$ref" in n}
    assert refs == {"#/$defs/Node"}
    assert "Address" not in json.dumps(compiled.schema)


@pytest.mark.parametrize(
    "instance",
    [
        {"quantity": 2, "ship_to": {"street": "1 Rue", "city": "Paris"}, "point": [2.3, 48.8]},
        {"quantity": 0, "ship_to": {"street": "1 Rue", "city": "Paris"}, "point": [2.3, 48.8]},
        {"quantity": 2, "ship_to": {"street": "1 Rue"}, "point": [2.3, 48.8]},
        {"quantity": 2, "ship_to": {"street": "x", "city": "y"}, "point": [1.0, 2.0], "extra": 1},
        {"quantity": 2, "ship_to": {"street": "x", "city": "y"}, "point": [1.0, 2.0], "mode": "rail"},
        {
            "quantity": 2,
            "ship_to": {"street": "x", "city": "y"},
            "point": [1.0, 2.0],
            "tree": {"name": "a", "children": [{"name": "b", "children": [{"name": 3}]}]},
        },
        {
            "quantity": 2,
            "ship_to": {"street": "x", "city": "y"},
            "point": [1.0, 2.0],
            "tree": {"name": "a", "children": [{"name": "b"}]},
        },
    ],
)
def test_schema_and_model_agree(instance: dict[str, object]) -> None:
    schema = compile_model(Order, mode="validation", what="t").schema
    Draft202012Validator.check_schema(schema)
    schema_ok = Draft202012Validator(schema).is_valid(instance)
    try:
        Order.model_validate_json(json.dumps(instance), strict=True)
        model_ok = True
    except ValidationError:
        model_ok = False
    assert schema_ok == model_ok


def test_non_object_root_is_a_definition_error() -> None:
    class Numbers(RootModel[list[int]]):
        pass

    with pytest.raises(DefinitionError, match='must be "type": "object"'):
        compile_model(Numbers, mode="serialization", what="tool 'x' output")


def test_not_a_model_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="expected a pydantic model"):
        compile_model(dict, mode="validation", what="tool 'x' input")  # type: ignore[arg-type]
