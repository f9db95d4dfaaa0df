"""Compile pydantic models to self-contained JSON Schema 2020-12 objects that clients accept.

What comes out: `"type": "object"` at the root, no `$schema`, no `$ref`/`$defs` (inlined), tuples as
`prefixItems` (pydantic's own form), every field description kept, pydantic's generated `title`s
dropped (they repeat the field name and cost payload). Only a truly recursive model keeps a local
`$ref` and the `$defs` it needs; the compiler reports which definitions those are.

Two rules apply to input schemas only (what a client sends):

- Strict: every object that comes from a model says `"additionalProperties": false`, because the
  server refuses unknown arguments at every level (`Tool(strict=True)`, the default).
- Optional is not nullable: `x: T | None = None` lists `x` as a plain `T` that may be left out,
  not `anyOf [T, null]` (which several clients mishandle). `null` stays where the author means
  it: a required `T | None` (must be sent, may be null), a `T | None` whose default is not None,
  or a field marked `Annotated[T | None, Nullable()]`. A `null` sent for a plain optional field
  is still accepted and means the same as leaving it out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from mcpkit.errors import DefinitionError

__all__ = ["CompiledSchema", "Nullable", "compile_model", "iter_subschemas"]

JsonSchema = dict[str, Any]

# Keywords whose value is one subschema, a list of subschemas, or a name -> subschema map.
_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_LIST = ("prefixItems", "anyOf", "oneOf", "allOf")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")

_DEFS_PREFIX = "#/$defs/"
_NULLABLE_MARK = "x-mcpkit-nullable"
_NULL = {"type": "null"}


class Nullable:
    """Keep `null` in an optional field's input schema: `note: Annotated[str | None, Nullable()] = None`.

    Without it, `x: T | None = None` is listed as a plain optional `T` (see the module docstring).
    """

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> JsonSchema:
        return {**handler(core_schema), _NULLABLE_MARK: True}


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A compiled schema and the definitions that had to stay as `$ref` because they recurse."""

    schema: JsonSchema
    recursive: tuple[str, ...] = ()


def iter_subschemas(schema: Any) -> list[Any]:
    """Return the direct subschemas of `schema` (keyword-aware: a property named `items` is not one).

    >>> iter_subschemas({"properties": {"items": {"type": "string"}}, "items": {"type": "integer"}})
    [{'type': 'integer'}, {'type': 'string'}]
    """
    if not isinstance(schema, dict):
        return []
    out: list[Any] = []
    for key in _ONE:
        if isinstance(schema.get(key), dict):
            out.append(schema[key])
    for key in _LIST:
        if isinstance(schema.get(key), list):
            out.extend(s for s in schema[key] if isinstance(s, dict))
    for key in _MAP:
        if isinstance(schema.get(key), dict):
            out.extend(s for s in schema[key].values() if isinstance(s, dict))
    return out


def compile_model(
    model: type[BaseModel],
    *,
    mode: Literal["validation", "serialization"],
    what: str,
    strict: bool = False,
) -> CompiledSchema:
    """Compile `model` to a self-contained object schema.

    Args:
        model: The pydantic model.
        mode: "validation" for inputs (optional fields lose `null`), "serialization" for outputs.
        what: Names the schema in error messages ("tool 'x' input").
        strict: Close every object that comes from a model (`"additionalProperties": false`).

    Returns:
        The compiled schema and the names of recursive definitions kept as local `$ref`s.

    Raises:
        DefinitionError: The model does not produce a JSON Schema, or its root is not an object.
    """
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise DefinitionError(f"{what}: expected a pydantic model class, got {model!r}")
    try:
        raw = model.model_json_schema(mode=mode)
    except Exception as exc:  # pydantic raises several types for unschemable fields
        raise DefinitionError(f"{what}: the model's JSON Schema does not compile: {exc}") from exc
    defs: dict[str, JsonSchema] = raw.pop("$defs", {})
    inliner = _Inliner(defs, optional_without_null=mode == "validation", close_objects=strict)
    schema = inliner.inline(raw, stack=())
    if inliner.kept:
        schema["$defs"] = {name: inliner.expanded[name] for name in sorted(inliner.kept)}
    schema.pop("$schema", None)
    if schema.get("type") != "object":
        raise DefinitionError(
            f'{what}: the schema root must be "type": "object" (got {schema.get("type")!r}); '
            "wrap the value in a model with one field"
        )
    return CompiledSchema(schema, tuple(sorted(inliner.kept)))


class _Inliner:
    """Replaces `#/$defs/X` references by copies of X, keeping only the references that recurse."""

    def __init__(
        self, defs: dict[str, JsonSchema], *, optional_without_null: bool, close_objects: bool
    ) -> None:
        self.defs = defs
        self.kept: set[str] = set()
        self.expanded: dict[str, JsonSchema] = {}
        self.optional_without_null = optional_without_null
        self.close_objects = close_objects

    def inline(self, node: JsonSchema, stack: tuple[str, ...]) -> JsonSchema:
        node = self._optional(node)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
            name = ref[len(_DEFS_PREFIX) :]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if name in stack:  # recursion: the only case a local $ref stays
                self.kept.add(name)
                if name not in self.expanded:
                    self.expanded[name] = {}  # placeholder, filled when the outer expansion ends
                return {"$ref": ref, **self._walk(siblings, stack)}
            if name not in self.defs:
                raise DefinitionError(f"unresolvable reference {ref!r} in a generated schema")
            target = self.inline(copy.deepcopy(self.defs[name]), (*stack, name))
            if name in self.kept:
                self.expanded[name] = copy.deepcopy(target)
            target.update(self._walk(siblings, stack))  # the field's own description wins
            return target
        return self._walk(node, stack)

    def _optional(self, node: JsonSchema) -> JsonSchema:
        """`anyOf [T, null]` with a `null` default becomes plain `T` (no default) unless marked Nullable."""
        if node.pop(_NULLABLE_MARK, False) or not self.optional_without_null:
            return node
        branches = node.get("anyOf")
        if not (isinstance(branches, list) and _NULL in branches and node.get("default", 0) is None):
            return node
        rest = [b for b in branches if b != _NULL]
        plain = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        if len(rest) != 1:
            return {**plain, "anyOf": rest}
        return {**rest[0], **plain}  # the field's own keywords (description) win

    def _walk(self, node: JsonSchema, stack: tuple[str, ...]) -> JsonSchema:
        out: JsonSchema = {}
        for key, value in node.items():
            if key == "title" or key == _NULLABLE_MARK:
                continue
            if key in _ONE and isinstance(value, dict):
                out[key] = self.inline(value, stack)
            elif key in _LIST and isinstance(value, list):
                out[key] = [self.inline(v, stack) if isinstance(v, dict) else v for v in value]
            elif key in _MAP and isinstance(value, dict):
                out[key] = {k: self.inline(v, stack) if isinstance(v, dict) else v for k, v in value.items()}
            else:
                out[key] = value
        if self.close_objects and isinstance(out.get("properties"), dict):
            out.setdefault("additionalProperties", False)
        return out
