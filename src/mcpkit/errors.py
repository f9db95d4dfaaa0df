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

Your own codes are subclasses: `class NotFound(ToolError): code = "NOT_FOUND"` (upper case, digits
and `_`; `INTERNAL` and `UNKNOWN_TOOL` are mcpkit's own).
"""

from __future__ import annotations

import re
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
"""mcpkit's own codes; a `ToolError` subclass may bring its own (any `str` matching `CODE_PATTERN`)."""

CODE_PATTERN = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_RESERVED_CODES = frozenset({"INTERNAL", "UNKNOWN_TOOL"})

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
        retryable: Whether the same call may succeed later; stated in the text the model reads.
        data: JSON-able detail. It goes to the operator's log; the client sees it (in the result's
            `_meta`) only when `expose_data` is true.
        expose_data: Send `data` to the client too (default: the class's `expose_data`, False
            unless a class says otherwise). Nothing is public by default, subclasses included: only
            data its author marked public reaches the model. mcpkit marks its own stable reason
            codes (a rate limit's wait, an egress refusal's reason) where it builds them.
    """

    code: ClassVar[str] = "TOOL_ERROR"
    default_retryable: ClassVar[bool] = False
    expose_data: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.code, str) or not CODE_PATTERN.fullmatch(cls.code):
            raise DefinitionError(
                f"{cls.__name__}.code must be UPPER_CASE letters, digits and _, got {cls.code!r}"
            )
        if cls.code in _RESERVED_CODES:
            raise DefinitionError(f"{cls.__name__}.code {cls.code!r} is reserved to mcpkit")

    def __init__(
        self,
        message: str,
        retryable: bool | None = None,
        data: Any = None,
        *,
        expose_data: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = self.default_retryable if retryable is None else retryable
        self.data = data
        self.data_for_client = type(self).expose_data if expose_data is None else expose_data

    def model_text(self) -> str:
        """What the model reads: the code, the message, and whether retrying may help."""
        text = f"{self.code}: {self.message}"
        lowered = self.message.lower()
        if self.retryable and "retry" not in lowered and "try again" not in lowered:
            text += " Retrying later may succeed."
        return text


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
        super().__init__(
            message or f"Rate limit reached; retry in {wait} s.",
            data={"retry_after_s": wait},
            expose_data=True,  # built here: the wait, never anything the caller's code put in
        )
        self.retry_after = wait


class ToolTimeout(ToolError):
    """The call ran past its deadline."""

    code = "TIMEOUT"
    default_retryable = True
