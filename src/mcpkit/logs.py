"""Operator logging: one structured record per call, and redaction of every loaded secret.

Redaction happens in the formatter of each handler, on the final text (message, arguments and
traceback alike): a filter on a parent logger would not run for child loggers' records, and a
filter that rewrites `msg` misses the traceback formatted later.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from typing import Any

__all__ = [
    "CALL_LOGGER",
    "REDACTED",
    "RedactingFormatter",
    "Redactor",
    "install_redaction",
    "log_call",
    "redact_arguments",
]

REDACTED = "[REDACTED]"
CALL_LOGGER = logging.getLogger("mcpkit.calls")
# Credentials that look like credentials even when nobody declared them.
_PATTERNS = re.compile(
    r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|((?:password|passwd|secret|token|api[_-]?key)\s*[=:]\s*)[^\s,;&\"']{4,}"
    r"|(://[^/\s:@]+:)[^@/\s]+(@)"
)
# Cheap gate: the pattern can only match where one of these (lower-cased) appears.
_GATES = ("bearer", "pass", "secret", "token", "api", "://")


class Redactor:
    """Replaces every registered secret value (and credential-shaped text) in a string."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, value: str) -> None:
        """Register a secret value; values shorter than 4 characters are too common to redact safely."""
        if len(value) < 4:
            return
        with self._lock:
            self._values.add(value)
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    @property
    def has_values(self) -> bool:
        """Whether any secret value is registered (else `scrub` has nothing to do)."""
        return self._pattern is not None

    def scrub(self, value: Any) -> Any:
        """`value` (text, or JSON-like data walked through) with every registered secret value replaced.

        Only declared values: unlike `redact`, no credential-shaped patterns, because this runs on
        what goes to the client, where `token=...` may be the legitimate answer.

        >>> r = Redactor(); r.add("s3cr3t-value")
        >>> r.scrub({"note": "key s3cr3t-value", "n": [1, "s3cr3t-value"]})
        {'note': 'key [REDACTED]', 'n': [1, '[REDACTED]']}
        """
        pattern = self._pattern
        if pattern is None:
            return value
        if isinstance(value, str):
            return pattern.sub(REDACTED, value)
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED]`."""
        if self._pattern is not None:
            text = self._pattern.sub(REDACTED, text)
        lowered = text.lower()
        if any(gate in lowered for gate in _GATES):
            text = _PATTERNS.sub(_keep_prefix, text)
        return text


def _keep_prefix(m: re.Match[str]) -> str:
    if m.group(1):
        return m.group(1) + REDACTED
    if m.group(2):
        return m.group(2) + REDACTED
    return f"{m.group(3)}{REDACTED}{m.group(4)}"


class RedactingFormatter(logging.Formatter):
    """Formats with an inner formatter, then redacts the whole final text."""

    def __init__(self, redactor: Redactor, inner: logging.Formatter | None = None) -> None:
        super().__init__()
        self.redactor = redactor
        self.inner = inner or logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.redact(self.inner.format(record))


def install_redaction(redactor: Redactor, *, stream: Any = None) -> None:
    """Put redaction on every handler of the root and `mcpkit` loggers.

    When neither has a handler, adds one to `mcpkit` writing to stderr (stdout belongs to the
    stdio transport). Safe to call more than once.
    """
    root, ours = logging.getLogger(), logging.getLogger("mcpkit")
    if not root.handlers and not ours.handlers:
        ours.addHandler(logging.StreamHandler(stream or sys.stderr))
        if ours.level == logging.NOTSET:
            ours.setLevel(logging.INFO)
    for handler in [h for logger in (root, ours) for h in logger.handlers]:
        fmt = handler.formatter
        if isinstance(fmt, RedactingFormatter):
            if fmt.redactor is not redactor:
                handler.setFormatter(RedactingFormatter(_Chain(fmt.redactor, redactor), fmt.inner))
        else:
            handler.setFormatter(RedactingFormatter(redactor, fmt))


class _Chain(Redactor):
    def __init__(self, *parts: Redactor) -> None:
        super().__init__()
        self.parts = parts

    @property
    def has_values(self) -> bool:
        return any(p.has_values for p in self.parts)

    def scrub(self, value: Any) -> Any:
        for part in self.parts:
            value = part.scrub(value)
        return value

    def redact(self, text: str) -> str:
        for part in self.parts:
            text = part.redact(text)
        return text


_SENSITIVE_KEY = re.compile(r"(?i)pass|secret|token|key|auth|cookie|credential|session|signature")
_MAX_ARGUMENTS_TEXT = 1000


def redact_arguments(arguments: Any, redactor: Redactor | None = None) -> str:
    """Arguments for an operator record: credential-named fields masked, secrets redacted, length capped.

    >>> redact_arguments({"user": "ann", "api_key": "k-123456", "nested": {"password": "pw123"}})
    '{"user":"ann","api_key":"[REDACTED]","nested":{"password":"[REDACTED]"}}'
    """

    def mask(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if _SENSITIVE_KEY.search(str(k)) else mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    text = json.dumps(mask(arguments), ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) > _MAX_ARGUMENTS_TEXT:
        text = text[:_MAX_ARGUMENTS_TEXT] + f"...(+{len(text) - _MAX_ARGUMENTS_TEXT} chars)"
    return redactor.redact(text) if redactor is not None else text


def log_call(record: dict[str, Any], *, level: int = logging.INFO) -> None:
    """Emit the one structured operator record of a call (as JSON text, and as `record.call`)."""
    if CALL_LOGGER.isEnabledFor(level):
        # makeRecord + handle: the same path as .log() without the stack walk for the caller's line.
        entry = CALL_LOGGER.makeRecord(
            CALL_LOGGER.name,
            level,
            __file__,
            0,
            json.dumps(record, default=str, ensure_ascii=False),
            (),
            None,
            extra={"call": record},
        )
        CALL_LOGGER.handle(entry)
