"""Operator logging: one structured record per call, and redaction of every loaded secret.

Redaction happens in the formatter of each handler, on the final text (message, arguments and
traceback alike): a filter on a parent logger would not run for child loggers' records, and a
filter that rewrites `msg` misses the traceback formatted later.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
import sys
import threading
import urllib.parse
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = [
    "CALL_LOGGER",
    "REDACTED",
    "RedactingFormatter",
    "Redactor",
    "call_secrets",
    "install_redaction",
    "log_call",
    "redact_arguments",
    "redact_call_secrets",
    "secret_fields",
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
        """Register a secret value of at least `MIN_SECRET_CHARS` characters (ValueError if shorter:
        three characters are too common to redact without mangling unrelated text).

        The value is also matched as it reads once escaped by `repr` or JSON (a log line that quotes
        user text with `%r` doubles its backslashes), and cut short (a log line that keeps the first N
        characters of user text may end inside the value): any prefix of at least `_MIN_CUT_PREFIX`
        characters of each spelling is redacted too. So are its common encodings, as a handler
        that builds a request writes them: percent-encoded (a URL query), JSON with `\\/`, hex,
        and base64 (standard and URL-safe, at any offset: inside a Basic header's `user:secret`).

        >>> r = Redactor(); r.add("s3cr3t-0123456789")
        >>> r.redact("query: s3cr3t-0123456789"[:20])
        'query: [REDACTED]'
        """
        if len(value) < MIN_SECRET_CHARS:
            raise ValueError(f"a secret of {len(value)} characters is too short to redact")
        with self._lock:
            self._values.add(value)
            self._compile()

    def discard(self, value: str) -> None:
        """Stop redacting `value` (a credential that has expired and been replaced); no error if unknown."""
        with self._lock:
            if value in self._values:
                self._values.discard(value)
                self._compile()

    def _compile(self) -> None:
        if not self._values:
            self._pattern = None
            return
        spellings = {s for v in self._values for s in _spellings(v)}
        self._pattern = re.compile(_cut_prefix_trie(spellings))

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


MIN_SECRET_CHARS = 4
"""Shorter secret values are refused: redacting every `739` would mangle unrelated text."""
_MIN_CUT_PREFIX = 8
_MAX_CUT_PREFIX = 128  # a prefix ends at most here: Python's regex parser recurses per nested group
_MIN_ENCODED = 8  # an encoded spelling shorter than this is too likely in unrelated text


def _spellings(value: str) -> set[str]:
    """`value` as it appears in text written by `repr` (either quote) or JSON, or encoded."""
    escaped = value.encode("unicode_escape").decode("ascii")
    plain = {
        value,
        repr(value)[1:-1],
        escaped.replace("'", "\\'"),
        escaped.replace('"', '\\"'),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    return plain | {e for e in _encodings(value) if len(e) >= _MIN_ENCODED}


def _encodings(value: str) -> set[str]:
    """`value` percent-encoded, slash-escaped in JSON, hex, and base64 at each of the 3 offsets.

    A base64 text holding the value after k bytes of something else (`user:` in a Basic header)
    has, in the middle, characters that depend on the value's bytes only: those are the spelling
    for offset k mod 3 (the one or two characters at each edge that mix in the neighbours stay).
    """
    raw = value.encode()
    found = {json.dumps(value)[1:-1].replace("/", "\\/"), raw.hex(), raw.hex().upper()}
    for quoted in (
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote(value, safe="/"),
        urllib.parse.quote_plus(value, safe=""),
        urllib.parse.quote_plus(value, safe="/"),
    ):
        found |= {quoted, re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quoted)}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start, end = -(-8 * shift // 6), 8 * (shift + len(raw)) // 6
        inner = encoded[start:end]
        found |= {inner, inner.replace("+", "-").replace("/", "_")}
    return found


def _cut_prefix_trie(spellings: set[str]) -> str:
    """A pattern for any spelling, or any prefix of one of `_MIN_CUT_PREFIX` characters or more.

    The spellings share one trie, each node a group of the characters that may follow it (made
    optional where a prefix may end): the regex takes the first alternative that matches, so
    spellings as separate alternatives would let a cut prefix of one (`tok-Sup3r` of
    `tok-Sup3r%2F...`) win over the whole of another (`tok-Sup3r\\/...`); in a trie the
    alternatives at a node begin with different characters, and greedy optional groups take the
    longest prefix present. Built without recursion: a value may be thousands of characters
    (cut prefixes of it are matched up to `_MAX_CUT_PREFIX` characters).
    """
    children: list[dict[str, int]] = [{}]
    stop: list[bool] = [False]
    for value in spellings:
        head = max(min(_MIN_CUT_PREFIX, len(value)), 4)
        node = 0
        for depth, char in enumerate(value, 1):
            nxt = children[node].get(char)
            if nxt is None:
                nxt = children[node][char] = len(children)
                children.append({})
                stop.append(False)
            node = nxt
            if head <= depth <= _MAX_CUT_PREFIX or depth == len(value):
                stop[node] = True
    # children are numbered after their parents: emit from the last node back to the root
    emitted = [""] * len(children)
    for node in range(len(children) - 1, -1, -1):
        parts = [re.escape(char) + emitted[child] for char, child in children[node].items()]
        for child in children[node].values():
            emitted[child] = ""  # free as we go: only the root's text is kept
        if not parts:
            continue
        body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
        emitted[node] = f"(?:{body})?" if stop[node] and node else body
    return emitted[0]


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
        return redact_call_secrets(self.redactor.redact(self.inner.format(record)))


_CALL_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("mcpkit_call_secrets", default=())


@contextmanager
def call_secrets(arguments: Any, secret: Collection[str]) -> Iterator[None]:
    """While a call runs, redact the values of its declared secret arguments (`secret_fields`) from
    every log line written in its context (a database error quoting a bound value, say)."""
    values = (
        tuple(str(v) for k, v in arguments.items() if k in secret and isinstance(v, (str, int, float)))
        if secret and isinstance(arguments, dict)
        else ()
    )
    token = _CALL_SECRETS.set(tuple(v for v in values if v))
    try:
        yield
    finally:
        _CALL_SECRETS.reset(token)


def redact_call_secrets(text: str) -> str:
    """`text` with the running call's secret argument values replaced (short ones as whole words only:
    a 3-digit PIN is redacted where it stands alone, not inside every longer number)."""
    for value in sorted(_CALL_SECRETS.get(), key=len, reverse=True):
        for spelled in {value, json.dumps(value)[1:-1], repr(value)[1:-1]}:
            if len(spelled) >= MIN_SECRET_CHARS:
                text = text.replace(spelled, REDACTED)
            else:
                text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(spelled)}(?![0-9A-Za-z])", REDACTED, text)
    return text


def install_redaction(redactor: Redactor, *, stream: Any = None, loggers: Sequence[str] = ()) -> None:
    """Put redaction on every handler of the root and `mcpkit` loggers, and of `loggers`.

    When neither root nor `mcpkit` has a handler, adds one to `mcpkit` writing to stderr (stdout
    belongs to the stdio transport). `loggers` names loggers that have handlers of their own and
    do not propagate (uvicorn's, set up after this first ran). Python's last-resort handler, which
    prints a warning of any other logger when no handler is configured (a tool's own
    `logging.getLogger(__name__)`), redacts too. Safe to call more than once.
    """
    root, ours = logging.getLogger(), logging.getLogger("mcpkit")
    if not root.handlers and not ours.handlers:
        ours.addHandler(logging.StreamHandler(stream or sys.stderr))
        if ours.level == logging.NOTSET:
            ours.setLevel(logging.INFO)
    named = [logging.getLogger(name) for name in loggers]
    last = [logging.lastResort] if logging.lastResort is not None else []
    for handler in [*(h for logger in (root, ours, *named) for h in logger.handlers), *last]:
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


_MAX_ARGUMENTS_TEXT = 1000


@functools.lru_cache(maxsize=1024)
def _model_schema(model: Any) -> Mapping[str, Any]:
    try:
        schema: Mapping[str, Any] = model.model_json_schema()
    except Exception:  # not a pydantic model, or a schema pydantic cannot write: nothing declared
        return {}
    return schema


def secret_fields(tool: Any) -> frozenset[str]:
    """The arguments a tool declares secret: `SecretStr`/`SecretBytes` fields of its input model, or
    properties of its `input_schema` marked `"writeOnly": true` or `"format": "password"`.

    >>> class Login:  # a tool with a hand-written schema (SecretStr fields give the same)
    ...     input_schema = {"properties": {"author": {"type": "string"},
    ...                     "password": {"type": "string", "format": "password", "writeOnly": True}}}
    >>> sorted(secret_fields(Login))
    ['password']
    """
    schema = getattr(tool, "input_schema", None)
    if schema is None:
        model = getattr(tool, "input", None)
        schema = _model_schema(model) if model is not None else {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return frozenset()
    return frozenset(
        str(name)
        for name, p in properties.items()
        if isinstance(p, Mapping) and (p.get("writeOnly") is True or p.get("format") == "password")
    )


def redact_arguments(arguments: Any, redactor: Redactor | None = None, secret: Collection[str] = ()) -> str:
    """Arguments for an operator record: declared secret fields masked, secret values redacted,
    length capped. Names are never guessed (`keyword`, `author` stay as they are): a field is masked
    when the tool declares it (`secret_fields`), a value when the server loaded it as a secret.

    >>> redact_arguments({"user": "ann", "keyword": "k-123456", "pin": "0000"}, secret={"pin"})
    '{"user":"ann","keyword":"k-123456","pin":"[REDACTED]"}'
    """
    shown = arguments
    if secret and isinstance(arguments, dict):
        shown = {k: REDACTED if k in secret else v for k, v in arguments.items()}
    text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)
    if redactor is not None:  # before the cut, which could leave a secret's first part unmatched
        text = redactor.redact(text)
    if len(text) > _MAX_ARGUMENTS_TEXT:
        text = text[:_MAX_ARGUMENTS_TEXT] + f"...(+{len(text) - _MAX_ARGUMENTS_TEXT} chars)"
    return text


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
