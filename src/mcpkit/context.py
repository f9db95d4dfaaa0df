"""The small context each handler receives: who is calling, a logger, secrets and the egress path."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import LoggingLevel, RequestId

from mcpkit.secrets import SecretNotDeclared

if TYPE_CHECKING:
    import httpx2

    from mcpkit.egress import GuardedClient
    from mcpkit.logs import Redactor
    from mcpkit.secrets import SecretStore

__all__ = ["ClientInfo", "Context"]


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """The client's name and version as it gave them in `initialize` (or the request envelope)."""

    name: str
    version: str


_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _at_least(level: str, threshold: str) -> bool:
    return _LEVELS.index(level) >= _LEVELS.index(threshold) if level in _LEVELS else True


class _CallLogAdapter(logging.LoggerAdapter[logging.Logger]):
    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        extra = dict(self.extra or {})
        extra.update(kwargs.get("extra") or {})
        kwargs["extra"] = extra
        return f"[{extra['call_id']}] {msg}", kwargs


class Context:
    """What a handler may know and use about its call.

    Attributes:
        call_id: Unique per call; it is in the operator's log line of the call.
        tool: The tool's name.
        client: The client's name and version, when it gave them.
        principal: The authenticated caller (HTTP with auth), else None.
        groups: The authenticated caller's groups (a JWT's groups claim), else empty.
        protocol_version: The negotiated MCP revision.
        request_id: The JSON-RPC id of this call (for `related_request_id` in server-to-client requests).
    """

    __slots__ = (
        "_allowed",
        "_egress",
        "_log",
        "_redactor",
        "_secrets",
        "call_id",
        "client",
        "groups",
        "min_client_level",
        "principal",
        "protocol_version",
        "request_id",
        "session",
        "state",
        "tool",
    )

    def __init__(
        self,
        *,
        call_id: str,
        tool: str,
        client: ClientInfo | None,
        principal: str | None,
        protocol_version: str,
        secrets: SecretStore | None = None,
        allowed_secrets: frozenset[str] = frozenset(),
        egress: GuardedClient | None = None,
        session: ServerSession | None = None,
        request_id: RequestId | None = None,
        min_client_level: LoggingLevel = "debug",
        groups: tuple[str, ...] = (),
        redactor: Redactor | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.call_id = call_id
        self.tool = tool
        self.client = client
        self.principal = principal
        self.groups = groups
        self.protocol_version = protocol_version
        self._log: logging.LoggerAdapter[logging.Logger] | None = None
        self._secrets = secrets
        self._allowed = allowed_secrets
        self._egress = egress
        self.session = session
        """The SDK's session of this request: the escape hatch for sampling and elicitation."""
        self.request_id = request_id
        self.min_client_level = min_client_level
        self._redactor = redactor
        self.state: dict[str, Any] = {} if state is None else state
        """Values middleware put on this call (`call.state`), e.g. the database a router picked."""

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose lines carry the call id; redacted against every loaded secret."""
        if self._log is None:
            self._log = _CallLogAdapter(
                logging.getLogger(f"mcpkit.tool.{self.tool}"), {"call_id": self.call_id, "tool": self.tool}
            )
        return self._log

    def secret(self, name: str) -> str | None:
        """The value of a declared secret, or None when the operator has not set it."""
        return self._store(name).get(name, self._allowed)

    def require_secret(self, name: str) -> str:
        """The value of a declared secret; fails with a model-safe message naming it when unset."""
        return self._store(name).require(name, self._allowed)

    def _store(self, name: str) -> SecretStore:
        if self._secrets is None:
            raise SecretNotDeclared(f"secret {name!r} is not declared by this tool or its server")
        return self._secrets

    async def fetch(self, url: str, **kwargs: Any) -> httpx2.Response:
        """Fetch `url` through the server's egress guard; the only sanctioned way out."""
        return await self._require_egress().fetch(url, **kwargs)

    async def fetch_json(self, url: str, **kwargs: Any) -> Any:
        """Fetch and decode JSON through the egress guard, optionally validated with `schema=Model`."""
        return await self._require_egress().fetch_json(url, **kwargs)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send a progress notification for this call (a no-op when the client asked for none)."""
        if self.session is not None:
            await self.session.report_progress(progress, total, self._scrub(message))

    async def notify_client(self, level: LoggingLevel, data: Any) -> None:
        """Send a log notification to the client on this call's stream (never secrets: models read it)."""
        if self.session is None or not _at_least(level, self.min_client_level):
            return
        with warnings.catch_warnings():  # the logging capability is deprecated in 2026-07-28, still served
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await self.session.send_log_message(
                level, self._scrub(data), logger=self.tool, related_request_id=self.request_id
            )

    def _scrub(self, value: Any) -> Any:
        return value if self._redactor is None else self._redactor.scrub(value)

    def _require_egress(self) -> GuardedClient:
        if self._egress is None:
            raise RuntimeError("this server has no egress client")
        return self._egress
