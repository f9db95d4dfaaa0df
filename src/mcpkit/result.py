"""What a call returns: the author's `ToolResult`, and its translation to the wire's `CallToolResult`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ValidationError

from mcpkit.errors import INTERNAL_MESSAGE, ErrorCode, ToolError

__all__ = ["META_PREFIX", "Outcome", "ToolResult", "error_outcome", "internal_outcome", "shape_output"]

META_PREFIX = "mcpkit/"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A handler's explicit result: text for the model and, optionally, structured content.

    Args:
        text: What the model reads. When omitted and `structured` is given, the compact JSON of it.
        structured: An instance of the tool's output model (or a dict that validates against it).
        content: Further content blocks (images, audio, embedded resources) after the text.
    """

    text: str | None = None
    structured: BaseModel | dict[str, Any] | None = None
    content: Sequence[types.ContentBlock] = ()


@dataclass(slots=True)
class Outcome:
    """A finished call, before it becomes a `CallToolResult`: what middleware receives and returns.

    Attributes:
        text: What the model reads.
        structured: The `structuredContent` object, when there is one.
        content: Further content blocks after the text.
        code: None for success, else the error code (errors usually arrive as raised `ToolError`s).
        retryable: For errors: may the same call succeed later.
        data: For errors: detail the model may see.
        meta: Entries for the result's `_meta` (mcpkit's own go under `mcpkit/`).
    """

    text: str | None
    structured: dict[str, Any] | None = None
    content: Sequence[types.ContentBlock | dict[str, Any]] = ()  # dicts: already in wire form
    code: ErrorCode | None = None  # None: success
    retryable: bool = False
    data: Any = None
    cached: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        return self.code is not None

    def encode(self) -> bytes:
        """The model-visible part of a successful result, as bytes a cache can keep."""
        blocks = [_dump_block(b) for b in self.content]
        return json.dumps({"text": self.text, "structured": self.structured, "content": blocks}).encode()

    @classmethod
    def decode(cls, data: bytes) -> Outcome:
        """The inverse of `encode`."""
        raw = json.loads(data)
        return cls(text=raw["text"], structured=raw["structured"], content=raw["content"])

    def scrubbed(self, scrub: Callable[[Any], Any]) -> Outcome:
        """This outcome with `scrub` applied to everything the client receives (secret values out)."""
        return Outcome(
            text=None if self.text is None else scrub(self.text),
            structured=None if self.structured is None else scrub(self.structured),
            content=[scrub(_dump_block(b)) for b in self.content],
            code=self.code,
            retryable=self.retryable,
            data=scrub(self.data),
            cached=self.cached,
            meta=scrub(self.meta),
        )

    def to_wire(self) -> dict[str, Any]:
        """The `CallToolResult` as wire JSON; per-call metadata goes in `_meta`, never in structuredContent.

        Built as a plain dict: the SDK accepts one, and skipping the pydantic round trip is a measurable
        share of a trivial call.
        """
        meta = {f"{META_PREFIX}{k}": v for k, v in self.meta.items()}
        if self.code is not None:
            error: dict[str, Any] = {"code": self.code, "retryable": self.retryable}
            if self.data is not None:
                error["data"] = self.data
            meta[f"{META_PREFIX}error"] = error
        blocks: list[dict[str, Any]] = [] if self.text is None else [{"type": "text", "text": self.text}]
        blocks.extend(_dump_block(b) for b in self.content)
        wire: dict[str, Any] = {"content": blocks, "isError": self.code is not None, "resultType": "complete"}
        if self.structured is not None:
            wire["structuredContent"] = self.structured
        if meta:
            wire["_meta"] = meta
        return wire


def _dump_block(block: types.ContentBlock | dict[str, Any]) -> dict[str, Any]:
    return (
        block if isinstance(block, dict) else block.model_dump(by_alias=True, mode="json", exclude_none=True)
    )


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def shape_output(value: Any, output: type[BaseModel] | None) -> Outcome:
    """Turn what a handler returned into an `Outcome`, validating structured output.

    Structured data (an output model instance, a dict, a `ToolResult.structured`) becomes
    `structuredContent` with its compact JSON as the text mirror when no text is given, whether or
    not the tool declares an output model; only a declared model also validates it. Other values
    (a string, a list, a number) become text.

    Raises:
        OutputInvalid: the value does not satisfy the tool's output model (an operator bug).
    """
    text: str | None = None
    structured: Any = None
    content: Sequence[types.ContentBlock] = ()
    if isinstance(value, ToolResult):
        text, structured, content = value.text, value.structured, value.content
    elif output is not None or isinstance(value, BaseModel | dict):
        structured = value
    elif isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    else:
        text = _json_text(value)
    data: dict[str, Any] | None = None
    if output is not None:
        if structured is None:
            raise OutputInvalid(
                "the tool declares an output model but the handler returned no structured content"
            )
        try:
            model = (
                structured
                if isinstance(structured, output)
                else output.model_validate(
                    structured.model_dump() if isinstance(structured, BaseModel) else structured
                )
            )
        except ValidationError as exc:
            raise OutputInvalid(f"structured output does not match {output.__name__}: {exc}") from exc
        data = model.model_dump(mode="json", by_alias=True)
    elif isinstance(structured, BaseModel):
        data = structured.model_dump(mode="json", by_alias=True)
    elif isinstance(structured, dict):
        data = json.loads(_json_text(structured))  # JSON-safe now, or an operator bug named here
    elif structured is not None:
        raise OutputInvalid(
            f"structured content must be a dict or a pydantic model, not {type(structured).__name__}"
        )
    if text is None and (data is not None or not content):
        text = _compact_json(data) if data is not None else ""
    return Outcome(text=text, structured=data, content=content)


def _json_text(value: Any) -> str:
    try:
        return _compact_json(value)
    except (TypeError, ValueError) as exc:
        raise OutputInvalid(f"handler returned an unserialisable {type(value).__name__}") from exc


class OutputInvalid(Exception):
    """The handler's return value broke the tool's own contract (an operator bug, masked as INTERNAL)."""


def error_outcome(err: ToolError) -> Outcome:
    """A model-visible error result with its stable code."""
    return Outcome(text=f"{err.code}: {err.message}", code=err.code, retryable=err.retryable, data=err.data)


def internal_outcome() -> Outcome:
    """The one generic sentence every unexpected failure becomes."""
    return Outcome(text=f"INTERNAL: {INTERNAL_MESSAGE}", code="INTERNAL", retryable=False)
