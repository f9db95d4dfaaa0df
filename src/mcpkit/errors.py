"""The errors of mcpkit.

    McpkitError                 root of everything mcpkit raises
    ├── DefinitionError         a tool or server is badly defined (raised at definition time)
    └── ToolError               model-visible tool execution error, code TOOL_ERROR
        ├── InvalidParams       INVALID_PARAMS: arguments failed validation
        ├── Refused             REFUSED: policy said no
        ├── RateLimited         RATE_LIMITED: over a rate limit, retryable, with the wait
        └── ToolTimeout         TIMEOUT: the call ran past its deadline, retryable

`UNKNOWN_TOOL` is a protocol error (JSON-RPC -32602), not a tool result, as the spec says.
Anything else a handler raises becomes `INTERNAL`: one generic sentence for the model, the
detail for the operator's log only.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

__all__ = [
    "INTERNAL_MESSAGE",
    "DefinitionError",
    "ErrorCode",
    "InvalidParams",
    "McpkitError",
    "RateLimited",
    "Refused",
    "ToolError",
    "ToolTimeout",
]

ErrorCode = Literal[
    "INVALID_PARAMS", "UNKNOWN_TOOL", "TOOL_ERROR", "REFUSED", "RATE_LIMITED", "TIMEOUT", "INTERNAL"
]

INTERNAL_MESSAGE = "The tool failed unexpectedly. The operator has the details; try again later."


class McpkitError(Exception):
    """Root of every error mcpkit raises."""


class DefinitionError(McpkitError, ValueError):
    """A tool or server definition is invalid; raised when it is defined, never at call time."""


class ToolError(McpkitError):
    """An intentional, model-visible tool error.

    Args:
        message: One short sentence the model may read. Never put exception text, SQL,
            paths or secrets in it.
        retryable: Whether the same call may succeed later.
        data: Small JSON-able detail for the client (sent in the result's `_meta`).
    """

    code: ClassVar[ErrorCode] = "TOOL_ERROR"
    default_retryable: ClassVar[bool] = False

    def __init__(self, message: str, retryable: bool | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = self.default_retryable if retryable is None else retryable
        self.data = data


class InvalidParams(ToolError):
    """The arguments failed validation; the message names the fields and what was expected."""

    code = "INVALID_PARAMS"


class Refused(ToolError):
    """A policy refused the call; the message says what is allowed."""

    code = "REFUSED"


class RateLimited(ToolError):
    """The caller is over a rate limit; `retry_after` says how many seconds to wait."""

    code = "RATE_LIMITED"
    default_retryable = True

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        wait = max(1, round(retry_after))
        super().__init__(message or f"Rate limit reached; retry in {wait} s.", data={"retry_after_s": wait})
        self.retry_after = wait


class ToolTimeout(ToolError):
    """The call ran past its deadline."""

    code = "TIMEOUT"
    default_retryable = True
