"""Small facts about JSON values and the `type` keyword, shared by rules."""

from __future__ import annotations

import json
import re
from typing import Any

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")


def declared_types(schema: dict[str, Any]) -> frozenset[str] | None:
    """The types a subschema's `type` keyword names, or `None` when it has no usable `type`.

    >>> sorted(declared_types({"type": ["string", "null"]}) or ())
    ['null', 'string']
    """
    value = schema.get("type")
    if isinstance(value, str):
        return frozenset((value,))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    return None


def json_type_matches(value: Any, kind: str) -> bool:
    """Whether a JSON value is of JSON Schema type `kind` (`1.0` is an integer, `True` is not).

    >>> json_type_matches(1.0, "integer"), json_type_matches(True, "integer")
    (True, False)
    """
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if kind == "number":
        return True
    return kind == "integer" and (isinstance(value, int) or value.is_integer())


def describe(value: Any) -> str:
    """A short name for a JSON value's kind, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON, as a server sends it.

    >>> json_size({"a": "é"})
    10
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


#: In compact JSON text: an escaped C0 control other than \t \n \r, DEL, a lone surrogate (json.dumps
#: keeps those raw with ensure_ascii=False), bidi controls, zero-width and tag characters.
SUSPICIOUS_TEXT = re.compile(
    r"\\u00(?:0[0-8bcefBCEF]|1[0-9a-fA-F]|7[fF])|\\[bf]|[\ud800-\udfff\u202a-\u202e\u2066-\u2069"
    r"\u200b-\u200f\u2060-\u2064\ufeff\U000e0000-\U000e007f\x7f]"
)


def json_size_flagged(value: Any) -> tuple[int, bool]:
    """`json_size(value)` and whether its text holds a character SL024 looks at (one dump for both).

    >>> json_size_flagged({"a": "x\u202e"})
    (12, True)
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if text.isascii():
        return len(text), "\\" in text and SUSPICIOUS_TEXT.search(text) is not None
    return len(text.encode("utf-8", "surrogatepass")), SUSPICIOUS_TEXT.search(text) is not None
