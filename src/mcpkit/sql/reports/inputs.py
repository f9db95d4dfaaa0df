"""A report's input model: its parameters as a strict pydantic model (the tool's inputSchema).

What the schema publishes is what a call may bind: a `number` is finite (no NaN or Infinity, which
Python's JSON reader accepts), an `integer` or `number` is never a JSON boolean (not even for an
enum of 0 and 1, which pydantic's `Literal` would otherwise match with `true`), and an `integer`
is a signed 64-bit value unless the file bounds it more tightly (SQLite binds nothing wider, and
one range on every engine keeps a report's meaning the same everywhere; the bounds are published).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    create_model,
)
from pydantic_core import PydanticCustomError

from mcpkit.sql.reports.pattern import anchored
from mcpkit.sql.reports.spec import INT_MAX, INT_MIN, ParamSpec

__all__ = ["default_problem", "input_model", "sample_value"]

_BASE: dict[str, Any] = {
    "integer": StrictInt,
    "number": float,  # strict JSON validation still accepts 3 for a number, as JSON Schema does
    "string": StrictStr,
    "boolean": StrictBool,
    "date": dt.date,
}


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("number_type", "Input should be a number, not true or false")
    return value


def _field(p: ParamSpec) -> tuple[Any, Any]:
    kind: Any = Literal[tuple(p.enum)] if p.enum else _BASE[p.type]
    if p.enum and p.type in ("integer", "number"):
        kind = Annotated[kind, BeforeValidator(_not_bool)]
    limits: dict[str, Any] = {}
    if p.minimum is not None:
        limits["ge"] = p.minimum
    if p.maximum is not None:
        limits["le"] = p.maximum
    if p.type == "integer" and not p.enum:
        limits["ge"] = max(limits.get("ge", INT_MIN), INT_MIN)
        limits["le"] = min(limits.get("le", INT_MAX), INT_MAX)
    if p.type == "number":
        limits["allow_inf_nan"] = False
    if p.pattern is not None:
        limits["pattern"] = anchored(p.pattern)  # JSON Schema's pattern is a search: anchor it
    if p.max_length is not None and not p.enum:
        limits["max_length"] = p.max_length
    description = p.description or None
    if p.secret:  # JSON Schema's mark for a value never read back; the call log masks it
        limits["json_schema_extra"] = {"writeOnly": True}
    if p.required:
        return kind, Field(..., description=description, **limits)
    if p.default is None:
        return kind | None, Field(default=None, description=description, **limits)
    return kind, Field(default=p.default, description=description, **limits)


def default_problem(p: ParamSpec) -> str | None:
    """Why `p`'s default would fail the validation a caller's value gets, or None.

    The file's checks name each rule; this runs the call's own validator on the default at load, so
    no rule can be missed (a default is bound without validation when the caller omits it).

    >>> default_problem(ParamSpec("s", "string", max_length=3, default="abcdefgh", required=False))
    'String should have at most 3 characters'
    """
    if p.default is None:
        return None
    probe = create_model("Default", value=_field(replace(p, required=True, default=None)))
    try:
        probe.model_validate({"value": p.default}, strict=True)
    except ValidationError as exc:
        return str(exc.errors(include_url=False)[0]["msg"])
    return None


def input_model(report: str, params: Sequence[ParamSpec]) -> type[BaseModel]:
    """The strict input model of one report: unknown fields forbidden, limits from the file.

    >>> from mcpkit.sql.reports.spec import INT_MAX, INT_MIN, ParamSpec
    >>> m = input_model("units_by_year", [ParamSpec("year", "integer", minimum=2021, maximum=2024)])
    >>> m.model_json_schema()["properties"]["year"]
    {'maximum': 2024, 'minimum': 2021, 'title': 'Year', 'type': 'integer'}

    Args:
        report: The report's name (the model is named after it).
        params: Its parameters.

    Returns:
        A pydantic model class.
    """
    fields: dict[str, Any] = {p.name: _field(p) for p in params}
    model: type[BaseModel] = create_model(
        "".join(part.capitalize() for part in report.replace("-", "_").replace(".", "_").split("_"))
        + "Input",
        __config__=ConfigDict(extra="forbid"),
        __doc__=f"Parameters of the {report} report.",
        **fields,
    )
    return model


def sample_value(p: ParamSpec) -> Any:
    """A valid value for `p`, to prepare or explain the SQL at load time."""
    if p.default is not None:
        return p.default
    if p.enum:
        return p.enum[0]
    if p.minimum is not None:
        return p.minimum
    if p.maximum is not None:
        return p.maximum
    return {"integer": 1, "number": 1.0, "string": "x", "boolean": True, "date": dt.date(2000, 1, 1)}[p.type]
