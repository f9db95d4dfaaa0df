"""Tool definitions: the typed object an author writes, and the decorator that builds one."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin, get_type_hints

from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from mcpkit.errors import DefinitionError

if TYPE_CHECKING:
    from mcpkit.context import Context

__all__ = ["NAME_PATTERN", "Handler", "Tool", "ToolAnnotations", "tool", "utf16_len"]

Handler = Callable[[Any, "Context"], "Any | Awaitable[Any]"]
"""`handler(args, ctx)`: sync or async; returns an output model, a dict, a str or a `ToolResult`."""

# The spec's tool-name rule (2025-11-25 tools page): 1-128 characters of A-Z a-z 0-9 _ - .
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
MAX_DESCRIPTION_UTF16 = 2048


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's `String.length` counts it.

    >>> utf16_len("a😀")
    3
    """
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool of a server.

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
    input: type[BaseModel]
    handler: Handler
    title: str | None = None
    output: type[BaseModel] | None = None
    annotations: ToolAnnotations | None = None
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

    def listed_annotations(self) -> ToolAnnotations:
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
        return ToolAnnotations(**{k: v for k, v in filled.items() if v is not None})


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    **options: Any,
) -> Callable[[Callable[..., Any]], Tool]:
    """Build a `Tool` from a typed function.

    The function either takes one pydantic model (and optionally `ctx`), or plain typed
    parameters that become the fields of a strict input model. The return annotation, when it
    is a pydantic model, becomes the output model. The docstring is the default description.

    >>> @tool()
    ... def add(a: int, b: int) -> int:
    ...     "Add two integers."
    ...     return a + b
    >>> add.name, sorted(add.input.model_fields)
    ('add', ['a', 'b'])
    """

    def build(fn: Callable[..., Any]) -> Tool:
        tool_name = name or fn.__name__
        hints = {k: _described(v) for k, v in get_type_hints(fn, include_extras=True).items()}
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "ctx"]
        wants_ctx = "ctx" in inspect.signature(fn).parameters
        ret = _bare(hints.get("return"))
        output = ret if isinstance(ret, type) and issubclass(ret, BaseModel) else None
        first = _bare(hints.get(params[0].name)) if len(params) == 1 else None
        if isinstance(first, type) and issubclass(first, BaseModel):
            input_model: type[BaseModel] = first

            def call_with(args: BaseModel, ctx: Context) -> Any:
                return fn(args, ctx=ctx) if wants_ctx else fn(args)
        else:
            fields: dict[str, Any] = {}
            for p in params:
                if p.name not in hints:
                    raise DefinitionError(f"tool {tool_name!r}: parameter {p.name!r} needs a type annotation")
                default = ... if p.default is inspect.Parameter.empty else p.default
                fields[p.name] = (hints[p.name], default)
            input_model = create_model(f"{tool_name}_input", __config__=ConfigDict(extra="forbid"), **fields)

            def call_with(args: BaseModel, ctx: Context) -> Any:
                kwargs = {k: getattr(args, k) for k in type(args).model_fields}
                return fn(**kwargs, ctx=ctx) if wants_ctx else fn(**kwargs)

        handler: Handler
        if inspect.iscoroutinefunction(fn):

            async def handler(args: Any, ctx: Context) -> Any:
                return await call_with(args, ctx)
        else:

            def handler(args: Any, ctx: Context) -> Any:
                return call_with(args, ctx)

        return Tool(
            name=tool_name,
            description=description or inspect.getdoc(fn) or "",
            input=input_model,
            output=options.pop("output", output),
            handler=handler,
            **options,
        )

    return build


def _bare(annotation: Any) -> Any:
    """`T` for `Annotated[T, ...]`, else the annotation itself."""
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation


def _described(annotation: Any) -> Any:
    """`Annotated[T, "text"]` as `Annotated[T, Field(description="text")]` (FastMCP's shorthand)."""
    if get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = get_args(annotation)
    if not any(isinstance(e, str) for e in extras):
        return annotation
    kept = [Field(description=e) if isinstance(e, str) else e for e in extras]
    return Annotated[base, *kept]


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
