"""Input `pattern`s checked as published: ECMA-262 regular expressions (JSON Schema 2020-12, 6.3.3).

pydantic checks a field's `pattern` with the Rust `regex` crate, whose `\\d`, `\\w` and `\\b` are
Unicode-aware: `^\\d{3}$` accepted Arabic-Indic and fullwidth digits, which every client
reading the schema (`new RegExp(p, "u")`) refuses. After pydantic has validated the arguments,
`pattern_error` checks each string against every pattern the input schema publishes for it with
`regress`, an ECMA-262 engine (the linter's judge of patterns too). A value must satisfy both
engines; they differ only at Unicode edges, where ECMA-262 is the narrower one except for the
negated classes (`\\D` of an Arabic-Indic digit), which Rust refuses and ECMA-262 accepts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import regress
from pydantic import BaseModel

from mcpkit.errors import DefinitionError
from mcpkit.schema import compile_model

__all__ = ["pattern_error"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def pattern_error(model: type[BaseModel], arguments: Any) -> str | None:
    """The first string in `arguments` (as sent) that fails its published ECMA-262 pattern, or None.

    >>> from pydantic import Field
    >>> class Code(BaseModel):
    ...     code: str = Field(pattern=r"^\\d{3}$")
    >>> pattern_error(Code, {"code": "123"}) is None
    True
    >>> print(pattern_error(Code, {"code": "١٢٣"}))
    code: does not match the pattern '^\\\\d{3}$'

    """
    schema = _schema_with_patterns(model)
    if schema is None:
        return None
    return _check(schema, arguments, "")


@functools.lru_cache(maxsize=1024)
def _schema_with_patterns(model: type[BaseModel]) -> Mapping[str, Any] | None:
    """The model's input schema when it has any `pattern` at all (most have none: no walk)."""
    try:
        schema = compile_model(model, mode="validation", what="input").schema
    except DefinitionError:  # the server refused it at start-up already; nothing to add here
        return None
    return schema if _has_pattern(schema) else None


def _has_pattern(node: Any) -> bool:
    if isinstance(node, dict):
        return isinstance(node.get("pattern"), str) or any(_has_pattern(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_pattern(v) for v in node)
    return False


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    try:
        return regress.Regex(pattern, "u")
    except (regress.RegressError, ValueError, TypeError):
        return None  # not ECMA-262 at all: the linter says so at start-up; pydantic's check stands


def _admits(node: Mapping[str, Any], value: Any) -> bool:
    """Whether `node`'s `type` (if any) admits `value` (the branch of a union that applies)."""
    kind = node.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if kinds is None:
        return True
    if isinstance(value, bool):
        return "boolean" in kinds
    return any(isinstance(value, _JSON_TYPES.get(k, ())) for k in kinds)


def _check(node: Any, value: Any, where: str) -> str | None:
    if not isinstance(node, Mapping):
        return None
    pattern = node.get("pattern")
    if isinstance(pattern, str) and isinstance(value, str):
        regex = _regex(pattern)
        if regex is not None and regex.find(value) is None:
            return f"{where or '(arguments)'}: does not match the pattern {pattern!r}"
    for key in ("allOf",):
        for sub in node.get(key, ()):
            if (problem := _check(sub, value, where)) is not None:
                return problem
    for key in ("anyOf", "oneOf"):
        branches = [b for b in node.get(key, ()) if isinstance(b, Mapping) and _admits(b, value)]
        if branches:
            problems = [_check(b, value, where) for b in branches]
            if all(p is not None for p in problems):
                return problems[0]
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for name, item in value.items():
            sub = properties.get(name, extra if isinstance(extra, Mapping) else None)
            if (problem := _check(sub, item, f"{where}.{name}" if where else str(name))) is not None:
                return problem
    if isinstance(value, list):
        prefix = node.get("prefixItems") or []
        items = node.get("items")
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else items
            if (problem := _check(sub, item, f"{where}.{i}" if where else str(i))) is not None:
                return problem
    return None
