"""Session tagging: the database session names the call, the MCP client and the model behind it.

A DBA watching live sessions (`pg_stat_activity.application_name`, the MySQL/MariaDB process
list) sees which agent runs what. `tag_calls` is middleware that notes, per tool call, the call
id, the client's name from `initialize` (`clientInfo`) and the model name where one is known; the
engine reads it when it opens the call's session (`session_label`). MCP has no standard field
for the model: clients send none today, so the model is shown only when middleware of the
operator's put one in `call.state["model"]` (from a gateway header, say).

Both names are chosen by the client, so they are reduced to `[A-Za-z0-9._@+-]` and capped: they
can close no comment, carry no newline, and never reach the SQL as anything but this text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mcpkit.sql.profiles.base import safe_call_id

if TYPE_CHECKING:
    from mcpkit import Call, CallNext, Outcome

__all__ = ["MODEL_STATE_KEY", "SessionTag", "current_tag", "session_label", "tag_calls", "tagged"]

MODEL_STATE_KEY: Final = "model"
"""The `call.state` key a middleware may set to the model's name."""
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._@+]+")  # runs become one "-"
_NAME_MAX: Final = 40
_current: ContextVar[SessionTag | None] = ContextVar("mcpkit_sql_session_tag", default=None)


def _clean(value: object, limit: int = _NAME_MAX) -> str | None:
    """A client-chosen name reduced to safe characters, or None when nothing is left.

    >>> _clean("Claude Desktop */ DROP")
    'Claude-Desktop-DROP'
    """
    if not isinstance(value, str):
        return None
    cleaned = _UNSAFE.sub("-", value).strip("-")[:limit]
    return cleaned or None


@dataclass(frozen=True)
class SessionTag:
    """What the database session of one call is tagged with (names already sanitised)."""

    call_id: str
    client: str | None = None
    model: str | None = None

    @classmethod
    def of(cls, call_id: str, client: object = None, model: object = None) -> SessionTag:
        """A tag from raw (client-chosen) values."""
        return cls(call_id, _clean(client), _clean(model))


def current_tag() -> SessionTag | None:
    """The tag of the call running in this context, if any."""
    return _current.get()


@contextmanager
def tagged(tag: SessionTag) -> Iterator[SessionTag]:
    """Tag the database sessions opened inside the block (in this context)."""
    token = _current.set(tag)
    try:
        yield tag
    finally:
        _current.reset(token)


async def tag_calls(call: Call, call_next: CallNext) -> Outcome:
    """Middleware: tag the database sessions of this call with its id, client and model.

    The handler runs in a worker thread with a copy of this context, so the engine sees the tag.
    """
    client = call.client.name if call.client is not None else None
    with tagged(SessionTag.of(call.call_id, client, call.state.get(MODEL_STATE_KEY))):
        return await call_next(call)


def session_label(call_id: str, *, limit: int = 200, compact: bool = False) -> str:
    """The text the database session shows for a call: its id, then client and model if known.

    Args:
        call_id: The call (also used when no tag is set, e.g. start-up checks).
        limit: Characters at most (PostgreSQL keeps 63 of application_name).
        compact: `mcpkit:<id prefix> <client> <model>` for short fields; else
            `mcpkit:<id> client=<name> model=<name>`.

    >>> session_label("0123456789abcdef0123456789abcdef")
    'mcpkit:0123456789abcdef0123456789abcdef'
    >>> with tagged(SessionTag.of("c1", "Claude */ Code", "claude-opus")):
    ...     session_label("c1")
    'mcpkit:c1 client=Claude-Code model=claude-opus'
    """
    cid = safe_call_id(call_id)
    tag = _current.get()
    client = tag.client if tag is not None and tag.call_id == call_id else None
    model = tag.model if tag is not None and tag.call_id == call_id else None
    if compact:
        head = f"mcpkit:{cid[:16] if client or model else cid}"
        label = " ".join([head, *(p[:19] for p in (client, model) if p)])
    else:
        label = f"mcpkit:{cid}" + (f" client={client}" if client else "")
        label += f" model={model}" if model else ""
    return label[:limit]
