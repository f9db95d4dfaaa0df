"""`@tool`: a `Tool` from a typed function, which stays callable as the function it was."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, ParamSpec, TypeVar, get_args, get_origin, overload

from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from mcpkit.context import Context
from mcpkit.definition import Tool
from mcpkit.errors import DefinitionError

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class FunctionTool(Tool[Any, Any], Generic[P, R]):
    """A `Tool` built by `@tool` that is still the function: `add(1, 2)` calls it directly."""

    fn: Callable[P, R] = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    title: str | None = None,
    output: type[BaseModel] | None = None,
    annotations: ToolAnnotations | None = None,
    category: str | None = None,
    keywords: Sequence[str] = (),
    mutating: bool = False,
    rate_limit_per_min: int | None = None,
    cache_ttl_s: float | None = None,
    timeout_s: float | None = None,
    secrets: Sequence[str] = (),
    strict: bool = True,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    name: str | Callable[..., Any] | None = None,
    *,
    description: str | None = None,
    title: str | None = None,
    output: type[BaseModel] | None = None,
    annotations: ToolAnnotations | None = None,
    category: str | None = None,
    keywords: Sequence[str] = (),
    mutating: bool = False,
    rate_limit_per_min: int | None = None,
    cache_ttl_s: float | None = None,
    timeout_s: float | None = None,
    secrets: Sequence[str] = (),
    strict: bool = True,
) -> Any:
    """Build a `Tool` from a typed function: `@tool`, or `@tool("name", category=...)` with options.

    The function either takes one pydantic model, or plain typed parameters that become the fields
    of an input model (`Annotated[int, Field(ge=1)]` constraints and descriptions kept; a plain
    string in `Annotated` is the description). The parameter annotated `Context` (any name; or
    named `ctx` without an annotation) receives the call's context. A pydantic return annotation
    becomes the output model; the docstring is the default description. The options are `Tool`'s.

    >>> @tool
    ... def add(a: int, b: int = 2) -> int:
    ...     "Add two integers."
    ...     return a + b
    >>> add.name, sorted(add.input.model_fields), add(1, 2)
    ('add', ['a', 'b'], 3)
    """
    options: dict[str, Any] = {
        "title": title,
        "annotations": annotations,
        "category": category,
        "keywords": keywords,
        "mutating": mutating,
        "rate_limit_per_min": rate_limit_per_min,
        "cache_ttl_s": cache_ttl_s,
        "timeout_s": timeout_s,
        "secrets": secrets,
        "strict": strict,
    }
    if callable(name):  # bare @tool
        return _build(name, None, description, output, options)
    if name is not None and not isinstance(name, str):
        raise DefinitionError(f"@tool takes a name string or a function, not {type(name).__name__}")

    def decorate(fn: Callable[P, R]) -> FunctionTool[P, R]:
        return _build(fn, name, description, output, options)

    return decorate


def _build(
    fn: Callable[P, R],
    name: str | None,
    description: str | None,
    output: type[BaseModel] | None,
    options: dict[str, Any],
) -> FunctionTool[P, R]:
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    call: Callable[..., Any] = fn
    where = f"tool {tool_name!r}"
    try:
        hints = {k: _described(v) for k, v in inspect.get_annotations(fn, eval_str=True).items()}
    except (NameError, TypeError) as exc:
        raise DefinitionError(f"{where}: its annotations do not resolve ({exc})") from None
    signature = inspect.signature(fn)
    ctx_name = _context_parameter(signature, hints, where)
    params = [p for p in signature.parameters.values() if p.name != ctx_name]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise DefinitionError(f"{where}: *args and **kwargs cannot become tool arguments")
    ret = _bare(hints.get("return"))
    returned_model = ret if isinstance(ret, type) and issubclass(ret, BaseModel) else None
    first = _bare(hints.get(params[0].name)) if len(params) == 1 else None
    if isinstance(first, type) and issubclass(first, BaseModel):
        input_model: type[BaseModel] = first
        positional = params[0].kind != params[0].KEYWORD_ONLY

        def call_with(args: BaseModel, ctx: Context) -> Any:
            extra = {ctx_name: ctx} if ctx_name else {}
            return call(args, **extra) if positional else call(**{params[0].name: args}, **extra)
    else:
        fields: dict[str, Any] = {}
        for p in params:
            if p.name not in hints:
                raise DefinitionError(f"{where}: parameter {p.name!r} needs a type annotation")
            fields[p.name] = (hints[p.name], ... if p.default is inspect.Parameter.empty else p.default)
        input_model = create_model(f"{tool_name}_input", __config__=ConfigDict(extra="forbid"), **fields)

        def call_with(args: BaseModel, ctx: Context) -> Any:
            kwargs = {k: getattr(args, k) for k in type(args).model_fields}
            if ctx_name:
                kwargs[ctx_name] = ctx
            return call(**kwargs)

    handler: Callable[[Any, Context], Any]
    if inspect.iscoroutinefunction(fn):

        async def handler(args: Any, ctx: Context) -> Any:
            return await call_with(args, ctx)
    else:

        def handler(args: Any, ctx: Context) -> Any:
            return call_with(args, ctx)

    return FunctionTool(
        name=tool_name,
        description=description or inspect.getdoc(fn) or "",
        input=input_model,
        output=output or returned_model,
        handler=handler,
        fn=fn,
        **options,
    )


def _context_parameter(signature: inspect.Signature, hints: dict[str, Any], where: str) -> str | None:
    """The parameter that receives the `Context`: annotated with it (any name), else one named `ctx`."""
    found = [n for n in signature.parameters if _is_context(hints.get(n))]
    if len(found) > 1:
        raise DefinitionError(f"{where}: more than one parameter is annotated Context ({', '.join(found)})")
    if found:
        return found[0]
    return "ctx" if "ctx" in signature.parameters and "ctx" not in hints else None


def _is_context(annotation: Any) -> bool:
    annotation = _bare(annotation)
    if isinstance(annotation, type):
        return issubclass(annotation, Context)
    return any(isinstance(a, type) and issubclass(a, Context) for a in get_args(annotation))


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
