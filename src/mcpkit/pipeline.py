"""The call pipeline: record -> lookup -> policy -> validate -> cache -> invoke -> shape.

Each stage is a plain `async (call, call_next) -> Outcome`, composed once when the server is built.
Errors raise inside the chain; the outermost stage turns them into results and writes the one
operator record of the call. Nothing a handler raises escapes this pipeline except the protocol
error for an unknown tool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from mcpkit.definition import Tool
from mcpkit.errors import InvalidParams, ToolError, ToolTimeout
from mcpkit.logs import Redactor, log_call, redact_arguments
from mcpkit.result import Outcome, OutputInvalid, error_outcome, internal_outcome, shape_output

if TYPE_CHECKING:
    from mcpkit.context import ClientInfo, Context

__all__ = ["Call", "Stage", "UnknownTool", "compose", "validation_message"]

log = logging.getLogger("mcpkit.pipeline")

CallNext = Callable[["Call"], Awaitable[Outcome]]
Stage = Callable[["Call", CallNext], Awaitable[Outcome]]


@dataclass(slots=True)
class Call:
    """One `tools/call` as it moves through the stages."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    make_context: Callable[[Call], Context]
    identity: str
    redactor: Redactor | None = None
    principal: str | None = None
    client: ClientInfo | None = None
    tool: Tool | None = None
    args: BaseModel | None = None
    started: float = field(default_factory=time.perf_counter)
    cached: bool = False
    log_fields: dict[str, Any] = field(default_factory=dict)


class UnknownTool(MCPError):
    """The protocol error for a name the server does not list (JSON-RPC -32602, as the spec says)."""

    def __init__(self, name: str) -> None:
        shown = name if len(name) <= 64 else name[:61] + "..."
        super().__init__(code=INVALID_PARAMS, message=f"Unknown tool: {shown!r}")


def compose(stages: Sequence[Stage], last: CallNext) -> CallNext:
    """Fold `stages` (outermost first) around `last` into one callable."""
    chain = last
    for stage in reversed(stages):
        chain = partial(stage, call_next=chain)  # type: ignore[call-arg]
    return chain


# --- stages -----------------------------------------------------------------------------------


async def record(call: Call, call_next: CallNext) -> Outcome:
    """Outermost: mask every failure into a safe result and write the call's operator record."""
    code = "INTERNAL"
    try:
        outcome = await call_next(call)
        code = outcome.code or "OK"
    except UnknownTool:
        code = "UNKNOWN_TOOL"
        raise
    except ToolError as err:
        outcome = error_outcome(err)
        code = err.code
    except OutputInvalid as exc:
        log.error("[%s] tool %r broke its output contract: %s", call.call_id, call.name, exc)
        outcome = internal_outcome()
    except Exception:
        log.exception("[%s] tool %r failed", call.call_id, call.name)
        outcome = internal_outcome()
    finally:
        elapsed_ms = round((time.perf_counter() - call.started) * 1000, 3)
        fields = {
            "call_id": call.call_id,
            "tool": call.name[:128],
            "client": call.identity,
            "outcome": code,
            "duration_ms": elapsed_ms,
            "cached": call.cached,
        }
        _after_answer(_log_record, fields, call)
    outcome.meta.update(callId=call.call_id, elapsedMs=elapsed_ms, cached=call.cached)
    return outcome


def lookup(tools: Mapping[str, Tool]) -> Stage:
    """Resolve the tool by name among the tools this server lists; others are unknown."""

    async def stage(call: Call, call_next: CallNext) -> Outcome:
        found = tools.get(call.name)
        if found is None:
            raise UnknownTool(call.name)
        call.tool = found
        return await call_next(call)

    return stage


async def validate(call: Call, call_next: CallNext) -> Outcome:
    """Validate the arguments strictly with the same pydantic model the input schema came from."""
    assert call.tool is not None
    try:
        # JSON mode: strict as the schema promises ("25" is no integer) while JSON's own
        # encodings of dates, enums and the like still validate.
        call.args = call.tool.input.model_validate_json(to_json(call.arguments), strict=True)
    except ValidationError as exc:
        raise InvalidParams(validation_message(exc)) from None
    return await call_next(call)


def invoke(default_timeout_s: float | None) -> CallNext:
    """Innermost: run the handler under its deadline and shape what it returns."""

    async def last(call: Call) -> Outcome:
        tool = call.tool
        assert tool is not None
        ctx = call.make_context(call)
        timeout = tool.timeout_s or default_timeout_s
        try:
            async with _deadline(timeout):
                if tool.is_async:
                    value = await tool.handler(call.args, ctx)
                else:
                    value = await anyio.to_thread.run_sync(
                        tool.handler, call.args, ctx, abandon_on_cancel=True
                    )
        except TimeoutError:
            raise ToolTimeout(f"The tool did not finish within {timeout:g} s.") from None
        return shape_output(value, tool.output)

    return last


def _deadline(seconds: float | None) -> AbstractAsyncContextManager[Any]:
    """A deadline raising TimeoutError; asyncio's own where it runs (a third of anyio's cost per call)."""
    if seconds is None:
        return nullcontext()
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend (trio)
        return _AnyioDeadline(seconds)
    return asyncio.timeout(seconds)


class _AnyioDeadline:
    def __init__(self, seconds: float) -> None:
        self.scope = anyio.fail_after(seconds)

    async def __aenter__(self) -> None:
        self.scope.__enter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return self.scope.__exit__(*exc)


def _log_record(fields: dict[str, Any], call: Call) -> None:
    log_call({**fields, "arguments": redact_arguments(call.arguments, call.redactor), **call.log_fields})


def _after_answer(fn: Callable[..., None], *args: Any) -> None:
    """Run `fn` on the loop's next turn, once the answer is on its way (measured: a trivial call's
    throughput moves from ~0.92x to ~1.0x of the bare SDK server's when the record waits)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fn(*args)
        return
    loop.call_soon(fn, *args)


# --- messages ---------------------------------------------------------------------------------

_MAX_ERRORS = 5
_MAX_LOC = 64


def validation_message(exc: ValidationError) -> str:
    """Name the failing fields and what was expected, without echoing the (possibly huge) input."""
    parts = []
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    for err in errors[:_MAX_ERRORS]:
        loc = ".".join(str(p)[:_MAX_LOC] for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg'][:160]}")
    more = f"; and {len(errors) - _MAX_ERRORS} more" if len(errors) > _MAX_ERRORS else ""
    return "Invalid arguments: " + "; ".join(parts) + more + "."
