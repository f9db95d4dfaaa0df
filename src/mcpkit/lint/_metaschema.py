"""Schema dialects and metaschema validation with the `jsonschema` package's own metaschemas.

Validating a whole schema against the 2020-12 metaschema costs milliseconds, so each object subschema
is validated on its own as a *skeleton*: the keywords its dialect's metaschema knows, with child
subschemas replaced by `{}` (the walk visits those children separately), values the metaschemas
leave free (`description`, `default`, `const`, ...) blanked and numbers reduced to what metaschemas
test (sign, integral or not). Skeletons are cached by a hashable key they are decoded from, so
thousands of tools cost a few dozen validations. A key that failed is re-validated in full on the
real subschema for exact messages.
"""

from __future__ import annotations

import functools
import json
import marshal
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import jsonschema_specifications
from jsonschema import (
    Draft3Validator,
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    FormatChecker,
    validators,
)

from mcpkit.lint._walk import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLE, Part

_NAMES: dict[type[Any], str] = {
    Draft202012Validator: "2020-12",
    Draft201909Validator: "2019-09",
    Draft7Validator: "draft-07",
    Draft6Validator: "draft-06",
    Draft4Validator: "draft-04",
    Draft3Validator: "draft-03",
}
_LEGACY = frozenset({"draft-07", "draft-06", "draft-04", "draft-03"})


@dataclass(frozen=True, slots=True)
class Dialect:
    """The JSON Schema dialect a schema declares with `$schema` (2020-12 when it declares none)."""

    name: str
    declared: str | None
    validator: type[Any]
    known: bool

    @property
    def legacy(self) -> bool:
        """draft-07 or older."""
        return self.name in _LEGACY

    @property
    def tuple_items(self) -> bool:
        """Whether an `items` array is a tuple here (every known dialect before 2020-12)."""
        return self.known and self.name != "2020-12"


DEFAULT_DIALECT = Dialect("2020-12", None, Draft202012Validator, True)


@functools.lru_cache(maxsize=256)
def _dialect_for_uri(uri: str) -> Dialect:
    cls = validators.validator_for({"$schema": uri}, default=None)
    if cls is None or cls not in _NAMES:
        return Dialect("unknown", uri, Draft202012Validator, False)
    return Dialect(_NAMES[cls], uri, cls, True)


def dialect_of(schema: Any) -> Dialect:
    """The dialect of a root schema, from its `$schema`.

    >>> dialect_of({"$schema": "http://json-schema.org/draft-07/schema#"}).name
    'draft-07'
    >>> dialect_of({}).name, dialect_of({"$schema": "https://example.com/mine"}).known
    ('2020-12', False)
    """
    if not isinstance(schema, dict) or "$schema" not in schema:
        return DEFAULT_DIALECT
    uri = schema["$schema"]
    if not isinstance(uri, str):
        return Dialect("unknown", json.dumps(uri), Draft202012Validator, False)
    return _dialect_for_uri(uri)


# Metaschema keys that would constrain keywords the metaschema does not name.
_OPEN_ENDED = ("additionalProperties", "patternProperties", "propertyNames", "unevaluatedProperties")


@functools.cache
def _known_keywords(cls: Any) -> frozenset[str] | None:
    """Keywords the dialect's metaschema (with its vocabularies) constrains; `None` if it limits others."""
    meta: dict[str, Any] = cls.META_SCHEMA
    base = str(meta.get("$id") or meta.get("id") or "")
    parts = [meta]
    for sub in meta.get("allOf", []):
        if isinstance(sub, dict) and isinstance(sub.get("$ref"), str):
            parts.append(jsonschema_specifications.REGISTRY.contents(urljoin(base, sub["$ref"])))
    names: set[str] = set()
    for part in parts:
        if any(key in part for key in _OPEN_ENDED):
            return None
        names.update(part.get("properties", {}))
    return frozenset(names)


@functools.cache
def _meta_validator(cls: Any) -> Any:
    # Without "regex": Python's `re` is not the ECMA-262 dialect clients compile `pattern` with; SL023
    # checks patterns with a real ECMA-262 engine instead.
    formats = [name for name in cls.FORMAT_CHECKER.checkers if name != "regex"]
    return cls(cls.META_SCHEMA, format_checker=FormatChecker(formats))


# How a keyword's value enters the cache key (and the skeleton decoded from it).
_RAW, _BLANK, _FREE, _EXAMPLES, _ONE_SCHEMA, _SCHEMA_LIST, _PATTERNS, _SCHEMA_MAP, _NAMES_LIST = range(9)
_ACTION_OF: dict[str, int] = {
    "title": _BLANK,
    "description": _BLANK,
    "$comment": _BLANK,
    "default": _FREE,
    "const": _FREE,
    "examples": _EXAMPLES,
    "items": _ONE_SCHEMA,
    **dict.fromkeys(SCHEMA_SINGLE, _ONE_SCHEMA),
    **dict.fromkeys(SCHEMA_LISTS, _SCHEMA_LIST),
    "patternProperties": _PATTERNS,
    **dict.fromkeys(SCHEMA_MAPS - {"patternProperties"}, _SCHEMA_MAP),
    "dependencies": _SCHEMA_MAP,
    "required": _NAMES_LIST,
    "enum": _NAMES_LIST,
}


@functools.cache
def _actions(cls: Any) -> tuple[dict[str, int], bool]:
    """Per keyword the dialect's metaschema knows, how to key it; and whether other keys may be dropped."""
    known = _known_keywords(cls)
    if known is None:
        return dict(_ACTION_OF), False
    return {k: _ACTION_OF.get(k, _RAW) for k in known}, True


# Encoded values: scalars stay; anything else is a tuple whose first item says what it was.
_SUB = ("S",)


def _enc(value: Any) -> Any:
    """A hashable stand-in for a keyword value that the metaschemas judge the same way.

    Numbers keep only what metaschemas test (sign, integral or not). Booleans and floats are
    tagged, since `False == 0` and `1.0 == 1` would otherwise share a cache entry.
    """
    kind = value.__class__
    if kind is str or value is None:
        return value
    if kind is bool:
        return ("B", value)
    if kind is int:
        return 1 if value > 0 else (0 if value == 0 else -1)
    if kind is float:
        if value.is_integer():
            return ("F", 1.0 if value > 0 else (0.0 if value == 0 else -1.0))
        return ("F", 1.5 if value > 0 else -1.5)
    if kind is list:
        return ("L", *map(_enc, value))
    return ("J", json.dumps(value, sort_keys=True))


def _enc_sub(value: Any) -> Any:
    return _SUB if value.__class__ is dict else _enc(value)


def _key(node: dict[str, Any], actions: dict[str, int], closed: bool) -> tuple[Any, ...]:
    out: list[Any] = []
    append = out.append
    get = actions.get
    for key, value in node.items():
        action = get(key)
        kind = value.__class__
        if action is None:
            if closed:
                continue
            action = _RAW
        if action == _RAW:
            append((key, value if kind is str or value is None else _enc(value)))
        elif action == _BLANK:
            append((key, "" if kind is str else _enc(value)))
        elif action == _FREE:
            append((key, None))
        elif action == _EXAMPLES:
            append((key, ("L",) if kind is list else _enc(value)))
        elif kind is list and action in (_ONE_SCHEMA, _SCHEMA_LIST):
            if set(map(type, value)) <= _DICT_ONLY:
                append((key, ("L", *(_SUB for _ in value))))
            else:
                append((key, ("L", *map(_enc_sub, value))))
        elif action == _ONE_SCHEMA:
            append((key, _SUB if kind is dict else _enc(value)))
        elif kind is dict and action == _PATTERNS:
            append((key, ("M", *((k, _enc_sub(v)) for k, v in value.items()))))
        elif kind is dict and action == _SCHEMA_MAP:
            if set(map(type, value.values())) <= _DICT_ONLY:
                append((key, ("M",)))
            else:
                append((key, ("M", *((k, _enc(v)) for k, v in value.items() if v.__class__ is not dict))))
        elif action == _NAMES_LIST and kind is list and _unique_strings(value):
            append((key, ("N", len(value))))
        else:
            append((key, _enc(value)))
    return tuple(out)


def _dec(value: Any) -> Any:
    if value.__class__ is not tuple:
        return value
    tag = value[0]
    if tag == "S":
        return {}
    if tag == "L":
        return [_dec(v) for v in value[1:]]
    if tag == "N":
        return [str(i) for i in range(value[1])]
    if tag in ("B", "F"):
        return value[1]
    if tag == "M":
        return {k: _dec(v) for k, v in value[1:]}
    return json.loads(value[1])


def _unique_strings(values: list[Any]) -> bool:
    return set(map(type, values)) <= _STR_ONLY and len(set(values)) == len(values)


_DICT_ONLY = frozenset({dict})
_STR_ONLY = frozenset({str})


_CACHE: dict[tuple[str, tuple[Any, ...]], tuple[tuple[Part, ...], ...]] = {}
_CACHE_LIMIT = 200_000
MetaError = tuple[tuple[Part, ...], str]


def metaschema_errors(dialect: Dialect, node: Any) -> list[MetaError]:
    """Errors of `node`'s own keywords against the dialect's metaschema, as (relative path, message).

    Child subschemas are not looked into: the caller validates each node of the walk.

    >>> metaschema_errors(DEFAULT_DIALECT, {"type": "strnig"})[0][0]
    ('type',)
    """
    return metaschema_checker(dialect)(node)


_UNPLANNED: Any = object()


class _Plan:
    """For one exact tuple of keys: how to read a quick cache key off a node with those keys.

    Only for nodes whose keys are all plain values (`type`, `maximum`, ...), annotations or free
    values. The quick key is the plain values marshalled (`marshal` keeps `False`, `0` and `0.0`
    apart, which a tuple key would not); annotations must be strings, or the slow path runs.
    """

    __slots__ = ("annotations", "plain")

    def __init__(self, keys: tuple[str, ...], actions: dict[str, int], closed: bool) -> None:
        plain: list[str] = []
        annotations: list[str] = []
        for key in keys:
            action = actions.get(key)
            if action is None:
                if closed:
                    continue
                action = _RAW
            if action == _RAW:
                plain.append(key)
            elif action == _BLANK:
                annotations.append(key)
            elif action != _FREE:
                raise LookupError(key)  # a subschema or list keyword: no quick key
        self.plain = operator.itemgetter(*plain, *plain[:1]) if plain else None
        self.annotations = operator.itemgetter(*annotations, *annotations[:1]) if annotations else None

    def key(self, node: dict[str, Any]) -> bytes:
        """The quick key; raises TypeError or ValueError when the slow path must decide."""
        if self.annotations is not None:
            "".join(self.annotations(node))  # TypeError unless every annotation is a string
        return marshal.dumps(self.plain(node)) if self.plain is not None else b""


@functools.lru_cache(maxsize=64)
def metaschema_checker(dialect: Dialect) -> Callable[[Any], list[MetaError]]:
    """`metaschema_errors` bound to one dialect: the validator and key table looked up once."""
    cls: Any = dialect.validator
    validator = _meta_validator(cls)
    actions, closed = _actions(cls)
    name = dialect.name
    cache = _CACHE
    plans: dict[tuple[str, ...], Any] = {}
    quick: dict[tuple[tuple[str, ...], bytes], tuple[tuple[Part, ...], ...]] = {}

    def full(node: Any) -> list[MetaError]:
        # 2020-12 reaches a subschema once per vocabulary: the same error can come several times.
        return list(
            dict.fromkeys((tuple(e.absolute_path), _short(e.message)) for e in validator.iter_errors(node))
        )

    def paths_of(node: dict[str, Any]) -> tuple[tuple[Part, ...], ...]:
        key = (name, _key(node, actions, closed))
        paths = cache.get(key)
        if paths is None:
            skeleton = {k: _dec(v) for k, v in key[1]}
            paths = tuple({tuple(e.absolute_path): None for e in validator.iter_errors(skeleton)})
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[key] = paths
        return paths

    def check(node: Any) -> list[MetaError]:
        if node.__class__ is not dict:
            return full(node)
        keys = tuple(node)
        plan = plans.get(keys, _UNPLANNED)
        if plan is _UNPLANNED:
            try:
                plan = _Plan(keys, actions, closed)
            except LookupError:
                plan = None
            if len(plans) >= _CACHE_LIMIT:
                plans.clear()
            plans[keys] = plan
        try:
            if plan is None:
                paths = paths_of(node)
            else:
                fast = (keys, plan.key(node))
                found = quick.get(fast)
                if found is None:
                    if len(quick) >= _CACHE_LIMIT:
                        quick.clear()
                    found = quick[fast] = paths_of(node)
                paths = found
        except (TypeError, ValueError):  # unhashable plain values, or JSON cannot encode them
            try:
                paths = paths_of(node)
            except (TypeError, ValueError):
                return full(node)
        if not paths:
            return []
        wanted = set(paths)
        return [(path, msg) for path, msg in full(node) if path in wanted]

    return check


def _short(message: str, limit: int = 240) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"


def cache_size() -> int:
    """How many distinct skeletons have been validated so far (for tests and the benchmark)."""
    return len(_CACHE)
