"""The small context each handler receives: who is calling, a logger, secrets and the egress path."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpkit.secrets import SecretStore

__all__ = ["ClientInfo", "Context", "Egress"]


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """The client's name and version as it gave them in `initialize` (or the request envelope)."""

    name: str
    version: str


class Egress:
    """The guarded HTTP path a server offers its handlers (see `mcpkit.egress`)."""

    async def fetch(self, url: str, **kwargs: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    async def fetch_json(self, url: str, **kwargs: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


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
        protocol_version: The negotiated MCP revision.
        log: A logger whose lines carry the call id; redacted against every loaded secret.
    """

    __slots__ = (
        "_allowed",
        "_egress",
        "_secrets",
        "call_id",
        "client",
        "log",
        "principal",
        "protocol_version",
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
        egress: Egress | None = None,
    ) -> None:
        self.call_id = call_id
        self.tool = tool
        self.client = client
        self.principal = principal
        self.protocol_version = protocol_version
        self.log: logging.LoggerAdapter[logging.Logger] = _CallLogAdapter(
            logging.getLogger(f"mcpkit.tool.{tool}"), {"call_id": call_id, "tool": tool}
        )
        self._secrets = secrets
        self._allowed = allowed_secrets
        self._egress = egress

    def secret(self, name: str) -> str | None:
        """The value of a declared secret, or None when the operator has not set it."""
        if self._secrets is None:
            from mcpkit.secrets import SecretNotDeclared

            raise SecretNotDeclared(f"secret {name!r} is not declared by this tool or its server")
        return self._secrets.get(name, self._allowed)

    def require_secret(self, name: str) -> str:
        """The value of a declared secret; fails with a model-safe message naming it when unset."""
        if self._secrets is None:
            from mcpkit.secrets import SecretNotDeclared

            raise SecretNotDeclared(f"secret {name!r} is not declared by this tool or its server")
        return self._secrets.require(name, self._allowed)

    async def fetch(self, url: str, **kwargs: Any) -> Any:
        """Fetch `url` through the server's egress guard; the only sanctioned way out."""
        return await self._require_egress().fetch(url, **kwargs)

    async def fetch_json(self, url: str, **kwargs: Any) -> Any:
        """Fetch and decode JSON through the egress guard, optionally validated with `schema=Model`."""
        return await self._require_egress().fetch_json(url, **kwargs)

    def _require_egress(self) -> Egress:
        if self._egress is None:
            raise RuntimeError("this server has no egress client")
        return self._egress
