"""The errors the egress path raises; all are model-visible `ToolError`s from `mcpkit.errors`.

    ToolError
    ├── Refused
    │   └── EgressDenied        the guard refused a URL, a hop or an address (code REFUSED)
    ├── UpstreamError           the upstream answered badly or not at all (retryable per case)
    │   ├── UpstreamStatusError the upstream answered with an error status (4xx/5xx)
    │   └── BadUpstreamResponse malformed JSON, schema mismatch, undecodable body
    ├── ResponseTooLarge        the body ran past the size cap
    └── ToolTimeout             the whole fetch ran past its deadline (from mcpkit.errors)

Messages are one sentence, safe for the model: they name the host the tool asked for, never an
address a resolver returned, a header value or a secret.
"""

from __future__ import annotations

from typing import Any

from mcpkit.errors import Refused, ToolError

__all__ = [
    "BadUpstreamResponse",
    "EgressDenied",
    "ResponseTooLarge",
    "UpstreamError",
    "UpstreamStatusError",
]


class EgressDenied(Refused):
    """The egress guard refused the request.

    Args:
        reason: A stable reason code (`loopback`, `private`, `userinfo`, `port`, ...).
        message: One model-safe sentence; it never contains a resolved address.
        detail: Operator-only detail (may name the resolved address); never shown to the model.
    """

    def __init__(self, reason: str, message: str, detail: str = "") -> None:
        super().__init__(message, retryable=False, data={"reason": reason}, expose_data=True)
        self.reason = reason
        self.detail = detail or message


class UpstreamError(ToolError):
    """The upstream could not be reached or answered badly."""


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; 429 and 5xx are retryable.

    Its `data` (the status, and the upstream's `Retry-After` when it sent one) goes to the client.
    """

    def __init__(self, status: int, message: str, retryable: bool, data: Any = None) -> None:
        super().__init__(
            message, retryable=retryable, data={"status": status, **(data or {})}, expose_data=True
        )
        self.status = status


class BadUpstreamResponse(UpstreamError):
    """The upstream's body could not be decoded or did not match the expected schema."""


class ResponseTooLarge(ToolError):
    """The response body was larger than the policy's `max_bytes`; reading stopped at the cap."""
