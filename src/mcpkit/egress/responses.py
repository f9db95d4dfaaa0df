"""Turn an upstream response into JSON or a model-visible error.

    2xx          decoded JSON (validated against `schema` when given); empty body -> None
    429, 5xx     UpstreamStatusError, retryable (429 carries Retry-After when numeric)
    other 4xx    UpstreamStatusError, not retryable
    other        UpstreamStatusError, not retryable (an unfollowed 3xx, say)
    bad JSON     BadUpstreamResponse; schema mismatch likewise, naming fields, never values

Upstream bodies are not copied into messages; an `error_map(response) -> str | None` hook may
surface the upstream's own message (cut to 300 characters).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import httpx2
from pydantic import TypeAdapter, ValidationError

from mcpkit.egress.errors import BadUpstreamResponse, UpstreamStatusError

__all__ = ["ErrorMap", "decode_json", "raise_for_upstream_status"]

ErrorMap = Callable[[httpx2.Response], str | None]
_MAX_MAPPED = 300


@functools.lru_cache(maxsize=256)
def _adapter(schema: Any) -> TypeAdapter[Any]:
    return TypeAdapter(schema)


def _mapped(response: httpx2.Response, error_map: ErrorMap | None) -> str | None:
    if error_map is None:
        return None
    try:
        text = error_map(response)
    except Exception:  # a hook that chokes on an odd body must not hide the status
        return None
    if not text:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_MAPPED else text[: _MAX_MAPPED - 1] + "…"


def raise_for_upstream_status(response: httpx2.Response, error_map: ErrorMap | None = None) -> None:
    """Raise `UpstreamStatusError` unless `response` is 2xx.

    Args:
        response: A read response.
        error_map: Optional hook returning the upstream's own error message, or None.
    """
    status = response.status_code
    if 200 <= status < 300:
        return
    host = response.request.url.host
    phrase = response.reason_phrase or "error"
    upstream = _mapped(response, error_map)
    data: dict[str, Any] = {}
    if status == 429:
        retryable = True
        message = f"The upstream {host} is rate limiting requests (HTTP 429); retry later."
        retry_after = response.headers.get("retry-after", "").strip()
        if retry_after.isdigit():
            data["retry_after_s"] = int(retry_after)
    elif status >= 500:
        retryable = True
        message = f"The upstream {host} failed (HTTP {status} {phrase}); retry later."
    elif status >= 400:
        retryable = False
        message = f"The upstream {host} rejected the request (HTTP {status} {phrase})."
    else:
        retryable = False
        message = f"The upstream {host} answered with an unexpected HTTP {status}."
    if upstream:
        message = f"{message} Upstream says: {upstream}"
    raise UpstreamStatusError(status, message, retryable=retryable, data=data)


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(root)"


def decode_json(response: httpx2.Response, schema: Any = None) -> Any:
    """Parse `response`'s body as JSON and, with `schema`, validate it with pydantic.

    Args:
        response: A read 2xx response.
        schema: A pydantic model or any type `TypeAdapter` accepts; None returns plain JSON.

    Raises:
        BadUpstreamResponse: not JSON, or not matching `schema` (fields named, values never).
    """
    host = response.request.url.host
    body = response.content
    if not body.strip():
        data: Any = None
    else:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise BadUpstreamResponse(
                f"The upstream {host} returned a body that is not valid JSON."
            ) from None
    if schema is None:
        return data
    try:
        return _adapter(schema).validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_field(e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)[:3])
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise BadUpstreamResponse(
            f"The upstream {host} returned JSON that does not match the expected shape: {problems}{more}."
        ) from None
