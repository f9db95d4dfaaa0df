"""Tool definitions: the typed object an author writes (the `@tool` decorator is in `mcpkit.decorator`)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, get_args

import mcp_types
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from mcpkit.errors import DefinitionError

if TYPE_CHECKING:
    from mcpkit.context import Context

__all__ = ["NAME_PATTERN", "Handler", "In", "Out", "Tool", "ToolAnnotations", "utf16_len"]

Handler = Callable[[Any, "Context"], "Any | Awaitable[Any]"]
"""`handler(args, ctx)`: sync or async; returns an output model, a dict, a str or a `ToolResult`."""

In = TypeVar("In", bound=BaseModel, default=Any, covariant=True)
"""The input model of a `Tool`: mypy checks the handler takes it."""
Out = TypeVar("Out", bound=BaseModel, default=Any, covariant=True)
"""The output model of a `Tool`, when it has one."""


class ToolAnnotations(mcp_types.ToolAnnotations):
    """MCP tool annotations, by the spec's camelCase names or their snake_case forms, both checked.

    `ToolAnnotations(readOnlyHint=True)` and `ToolAnnotations(read_only_hint=True)` are the same;
    a misspelt hint (`readonly=True`) is an error instead of being silently dropped, which the SDK's
    own model would do.
    """

    model_config = ConfigDict(extra="forbid")


# The spec's tool-name rule (2025-11-25 tools page): 1-128 characters of A-Z a-z 0-9 _ - .
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
MAX_DESCRIPTION_UTF16 = 2048


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's `String.length` counts it.

    >>> utf16_len("a😀")
    3
    """
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@dataclass(frozen=True)
class Tool(Generic[In, Out]):
    """One tool of a server, generic in its input and output models (`Tool[OrderIn, Order]`).

    mypy infers both from `input=` and `output=` and checks that `handler` takes the input model:
    a handler written for another model is a type error, not a call-time surprise.

    Args:
        name: Unique per server; 1-128 of `A-Za-z0-9_-.` (the spec's rule).
        description: What the tool does, for the model; at most 2048 UTF-16 code units.
        input: The pydantic model the arguments must satisfy; its schema becomes `inputSchema`.
        handler: `handler(args, ctx)`, sync or async. Sync handlers run in a worker thread.
        title: A human-readable name.
        output: Optional pydantic model for `structuredContent`; its schema becomes `outputSchema`.
        annotations: MCP tool annotations; omitted hints get conservative defaults.
        category: Groups tools for toolsets, category denylists and cache invalidation.
        keywords: Extra words `find_tools` searches.
        mutating: The tool changes state; it is then not read-only and invalidates its category's cache.
        rate_limit_per_min: Calls allowed per minute per client identity (None: the server default).
        cache_ttl_s: Seconds a result may be served from cache (None: never cached).
        timeout_s: Deadline for one call (None: the server default).
        secrets: Names of secrets this tool may read through `ctx.secret`.
        input_schema: Escape hatch: a hand-written `inputSchema` listed as given instead of the
            compiled one. Arguments are still validated by `input`, so the two must agree.
        strict: Refuse unknown arguments at every level of `input` (the default; the schema says
            `"additionalProperties": false` wherever validation refuses). `strict=False` is the
            opt-out: each model's own `extra` setting then decides (pydantic's default ignores them).
    """

    name: str
    description: str
    input: type[In]
    handler: Callable[[In, Context], Any]
    title: str | None = None
    output: type[Out] | None = None
    annotations: mcp_types.ToolAnnotations | None = None
    category: str | None = None
    keywords: Sequence[str] = ()
    mutating: bool = False
    rate_limit_per_min: int | None = None
    cache_ttl_s: float | None = None
    timeout_s: float | None = None
    secrets: Sequence[str] = field(default=())
    input_schema: Mapping[str, Any] | None = None
    strict: bool = True
    is_async: bool = field(init=False, repr=False, compare=False)
    """Whether the handler must be awaited (decided once, not per call)."""

    def __post_init__(self) -> None:
        where = f"tool {self.name!r}"
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise DefinitionError(
                f"{where}: a tool name must be 1-128 characters of letters, digits, '_', '-' or '.'"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise DefinitionError(f"{where}: a description is required; clients show it to the model")
        if (n := utf16_len(self.description)) > MAX_DESCRIPTION_UTF16:
            raise DefinitionError(
                f"{where}: the description is {n} UTF-16 code units; "
                f"clients cut it at {MAX_DESCRIPTION_UTF16}"
            )
        if not callable(self.handler):
            raise DefinitionError(f"{where}: handler is not callable")
        object.__setattr__(self, "is_async", is_async_handler(self.handler))
        for what, value in (
            ("rate_limit_per_min", self.rate_limit_per_min),
            ("cache_ttl_s", self.cache_ttl_s),
            ("timeout_s", self.timeout_s),
        ):
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise DefinitionError(f"{where}: {what} must be a positive number, got {value!r}")
        ann = self.annotations
        if ann is not None and self.mutating and ann.read_only_hint:
            raise DefinitionError(f"{where}: a mutating tool cannot carry readOnlyHint=true")
        if isinstance(self.keywords, str) or isinstance(self.secrets, str):
            raise DefinitionError(f"{where}: keywords and secrets are sequences of strings, not one string")
        if self.strict and isinstance(self.input, type) and issubclass(self.input, BaseModel):
            loose = [f"{m.__name__} (extra={m.model_config['extra']!r})" for m in _loose_models(self.input)]
            if loose:
                raise DefinitionError(
                    f"{where}: the tool is strict (unknown arguments are refused at every level) but "
                    f"{', '.join(loose)} says otherwise; pass strict=False to let each model decide"
                )

    def listed_annotations(self) -> mcp_types.ToolAnnotations:
        """The annotations as listed: the author's values, conservative defaults for the rest."""
        given = self.annotations or ToolAnnotations()
        read_only = given.read_only_hint if given.read_only_hint is not None else not self.mutating
        filled: dict[str, Any] = {
            "title": given.title or self.title,
            "read_only_hint": read_only,
            "open_world_hint": True if given.open_world_hint is None else given.open_world_hint,
        }
        if not read_only:  # the spec gives destructive/idempotent meaning only for tools that write
            filled["destructive_hint"] = True if given.destructive_hint is None else given.destructive_hint
            filled["idempotent_hint"] = False if given.idempotent_hint is None else given.idempotent_hint
        return mcp_types.ToolAnnotations(**{k: v for k, v in filled.items() if v is not None})


def _loose_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """Models in `model`'s field tree (itself included) whose config sets `extra` to anything but forbid."""
    seen: set[type[BaseModel]] = set()
    loose: list[type[BaseModel]] = []
    stack: list[Any] = [model]
    while stack:
        tp = stack.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in seen:
                continue
            seen.add(tp)
            if tp.model_config.get("extra", "forbid") != "forbid":
                loose.append(tp)
            stack.extend(f.annotation for f in tp.model_fields.values())
        else:
            stack.extend(get_args(tp))
    return loose


def is_async_handler(handler: Handler) -> bool:
    """Whether `handler` must be awaited (coroutine functions and objects with an async `__call__`)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    )


def __getattr__(name: str) -> Any:
    """`mcpkit.definition.tool` moved to `mcpkit.decorator` (kept importable from here)."""
    if name == "tool":
        from mcpkit.decorator import tool

        return tool
    raise AttributeError(f"module 'mcpkit.definition' has no attribute {name!r}")
